//! SEL rows of the reference pool (recipe knob `tool_pool = "reference"`, format `sel`), named as
//! the Live API-Bench reference names them so a kept row runs in IBM's sequencing harness as is
//! (`invocable_api_hub`: `sql_to_api/sql_sequencing_dataset_builder.py` builds a query's toolkit
//! from `tool_calling/tools/sequencing_tools.py`).
//!
//! IBM's SEL tools are its SLOT tools with some arguments bound by `functools.partial`, so the
//! reference pool's SEL rows are the SLOT reference pool's sequences ([`super::restrict`]) bound
//! into SEL ([`crate::tools::sel::bind`]), with two names changed to IBM's:
//! - the getter of column `k` is `get_<k>s` (IBM's `create_getter`: `get_TV_Channel_Countrys`,
//!   `get_cars_data_Cylinderss`), not toolforge's English plural
//!   ([`crate::tools::sel::getter_name`]: `get_TV_Channel_Countries`);
//! - an aggregation is `compute_data_<agg>` with `distinct` an argument (IBM binds only
//!   `aggregation_type` and `limit=-1`, and its builder passes `distinct` on every call), not
//!   toolforge's `compute_data_<agg>_distinct`.
//!
//! The instance toolkit ([`tools`]) is the reference pool's SEL tools under those names (the
//! decisions of [`super::decisions::SEL`]): bound filters with the conditions the pool runs,
//! both sorts, `compute_data_{count,sum,mean,min,max}` with `distinct`, `concatenate_data`,
//! `select_unique_values`, `truncate` and one getter per column of the joined table — no
//! per-group aggregate getters, `group_data_by`, `transform_data_*`, `calculate_*` or
//! `combine_data_*`, which the reference cannot run faithfully (or lacks).
//! [`crate::tools::sel::unbind`] reads both namings back (a getter matching no English plural
//! is `get_<key>s`).

use std::collections::HashMap;

use serde_json::json;

use super::decisions;
use crate::tools::executor::Executor;
use crate::tools::pool::{KeyDescription, slot_tools};
use crate::tools::sel::{self, sel_tools};
use crate::tools::{Call, ToolSpec};

/// IBM's name for the getter of column `key` (`create_getter`: `f"get_{column}s"`).
pub fn getter_name(key: &str) -> String {
    format!("get_{key}s")
}

/// Binds a SLOT sequence of the reference pool into SEL under IBM's names (module docs).
pub fn bind(slot: &[Call]) -> Vec<Call> {
    let getters: HashMap<String, String> = slot
        .iter()
        .filter(|c| c.name == "retrieve_data")
        .filter_map(|c| c.arguments.get("key_name")?.as_str())
        .map(|k| (sel::getter_name(k), getter_name(k)))
        .collect();
    sel::bind(slot)
        .into_iter()
        .map(|mut c| {
            if let Some(ibm) = getters.get(&c.name) {
                c.name = ibm.clone();
            } else if let Some(bound) = c.name.strip_prefix("compute_data_") {
                let (agg, distinct) = match bound.strip_suffix("_distinct") {
                    Some(a) => (a.to_string(), true),
                    None => (bound.to_string(), false),
                };
                c.name = format!("compute_data_{agg}");
                c.arguments.insert("distinct".into(), json!(distinct));
            }
            c
        })
        .collect()
}

/// [`super::restrict`] for a SEL recipe: the same SLOT calls kept, and a drop detail that names
/// the SEL call outside the pool as the row would have called it (`call 2 `compute_data_sum`
/// (SLOT `aggregate_data`, SUM): …`, getters under IBM's names).
pub fn restrict(
    executor: &Executor,
    setup: &Call,
    additional_setup: &[Call],
    calls: &[Call],
) -> Result<Vec<Call>, String> {
    super::restrict(executor, setup, additional_setup, calls).map_err(|detail| {
        let at = detail
            .strip_prefix("call ")
            .and_then(|rest| rest.split_once(' '))
            .and_then(|(i, _)| i.parse::<usize>().ok())
            .and_then(|i| calls.get(i));
        match at.and_then(|c| Some((c, bind(std::slice::from_ref(c)).into_iter().next()?))) {
            Some((slot, sel)) if sel.name != slot.name => detail.replacen(
                &format!("`{}` (", slot.name),
                &format!("`{}` (SLOT `{}`, ", sel.name, slot.name),
                1,
            ),
            _ => detail,
        }
    })
}

/// The reference pool's SEL toolkit of an instance under IBM's names (module docs); with
/// `keys = None`, the dataset-level catalog (no getters).
pub fn tools(keys: Option<&[KeyDescription]>) -> Vec<ToolSpec> {
    let distinct = slot_tools(None)
        .into_iter()
        .find(|t| t.name == "aggregate_data")
        .and_then(|t| t.parameters["properties"].get("distinct").cloned())
        .expect("aggregate_data has `distinct`");
    let mut out: Vec<ToolSpec> = sel_tools(keys)
        .into_iter()
        .filter(|t| !t.name.starts_with("get_") && decisions::sel(&t.name).is_some_and(|d| d.in_pool))
        .map(|mut t| {
            if t.name.starts_with("select_data_") {
                // IBM's filters compare with a value only (decision `filter_data.other_key_name`).
                if let Some(props) = t.parameters["properties"].as_object_mut() {
                    props.remove("other_key_name");
                }
                if let Some(required) = t.parameters["required"].as_array_mut() {
                    required.push(json!("value"));
                }
                t.parameters["properties"]["value"]["description"] =
                    json!("The value to compare with, or the `$LABEL$` of an earlier single value.");
                t.description = t.description.replace(
                    " (or the value of another column of the same row, `other_key_name`)",
                    "",
                );
            }
            if t.name.starts_with("sort_data_") {
                // IBM sorts by a column only (decision `sort_data.by_values`).
                if let Some(props) = t.parameters["properties"].as_object_mut() {
                    props.remove("by_values");
                }
                if let Some(required) = t.parameters["required"].as_array_mut() {
                    required.push(json!("key_name"));
                }
                t.description = t
                    .description
                    .replace(" (or by `by_values`, a list with one value per row)", "");
            }
            if t.name.starts_with("compute_data_") {
                t.parameters["properties"]["distinct"] = distinct.clone();
                t.description = t.description.replacen(
                    "of the values",
                    "of the values (or, with `distinct`, the distinct values)",
                    1,
                );
            }
            t
        })
        .collect();
    for k in keys.into_iter().flatten() {
        let mut g = sel::getter(&k.key_name, &k.description, &k.dtype);
        g.name = getter_name(&k.key_name);
        g.parameters["properties"]["data_source"]["description"] =
            json!("The table to read, given as the `$LABEL$` of an earlier output.");
        out.push(g);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn call(name: &str, args: Value, label: &str) -> Call {
        Call {
            name: name.into(),
            arguments: args.as_object().unwrap().clone(),
            label: label.into(),
        }
    }

    /// The reference pool's SEL rows failed in IBM's harness on two names (75 of 482 Spider dev
    /// rows): English-plural getters and `compute_data_<agg>_distinct`. They are IBM's names now,
    /// every call is in the instance toolkit, and unbinding gives back the SLOT calls.
    #[test]
    fn reference_sel_rows_use_ibm_getter_and_aggregation_names() {
        let slot = vec![
            call(
                "aggregate_data",
                json!({"data_source": "$t$", "key_name": "TV_Channel_Country", "aggregation_type": "count", "distinct": true, "limit": -1}),
                "COUNT",
            ),
            call(
                "aggregate_data",
                json!({"data_source": "$t$", "key_name": "cars_data_Cylinders", "aggregation_type": "max", "distinct": false, "limit": -1}),
                "MAX",
            ),
            call(
                "retrieve_data",
                json!({"data_source": "$t$", "key_name": "TV_Channel_Country", "distinct": true, "limit": 2}),
                "SELECT_COL_0",
            ),
            call(
                "retrieve_data",
                json!({"data_source": "$t$", "key_name": "cars_data_Cylinders", "distinct": false, "limit": -1}),
                "SELECT_COL_1",
            ),
        ];
        let sel = bind(&slot);
        let names: Vec<&str> = sel.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "compute_data_count",
                "compute_data_max",
                "get_TV_Channel_Countrys",
                "select_unique_values",
                "truncate",
                "get_cars_data_Cylinderss"
            ]
        );
        assert_eq!(sel[0].arguments["distinct"], json!(true));
        assert_eq!(sel[1].arguments["distinct"], json!(false));
        let keys: Vec<KeyDescription> = ["TV_Channel_Country", "cars_data_Cylinders"]
            .iter()
            .map(|k| KeyDescription {
                key_name: k.to_string(),
                description: "d".into(),
                dtype: "string".into(),
            })
            .collect();
        let toolkit = tools(Some(&keys));
        for n in &names {
            assert!(toolkit.iter().any(|t| &t.name == n), "{n} in the reference SEL toolkit");
        }
        let columns: Vec<String> = keys.iter().map(|k| k.key_name.clone()).collect();
        for (s, u) in [(0, 0), (1, 1), (2, 2), (5, 3)] {
            let back = sel::unbind(&sel[s], &columns);
            assert_eq!(back.name, slot[u].name);
            assert_eq!(back.arguments["key_name"], slot[u].arguments["key_name"]);
        }
        assert_eq!(sel::unbind(&sel[0], &columns).arguments["distinct"], json!(true));
        let compute = toolkit.iter().find(|t| t.name == "compute_data_count").unwrap();
        assert!(compute.parameters["properties"].get("distinct").is_some());
        assert!(
            !toolkit
                .iter()
                .any(|t| t.name.ends_with("_distinct") || t.name == "get_counts")
        );
    }
}
