//! For every SLOT and SEL tool toolforge emits (and every categorical argument value of a SLOT
//! tool in the pool), whether it is in the reference pool (`tool_pool = "reference"`) and why:
//! the decision table that [`super::restrict`] and [`super::sel::tools`] follow (they keep
//! their own checks; the tests hold the three together). A unit test fails
//! when a tool or categorical value appears in toolforge's SLOT/SEL pools without a decision
//! here, so extending the pools means deciding what the reference does with the addition.
//!
//! Keys: a SLOT tool name; `tool.argument=value` for a categorical argument of an in-pool SLOT
//! tool; `tool.argument` for an optional argument the reference lacks; a SEL tool name, with `get_<column>s` (IBM's getter name), `get_<English plural>`
//! (toolforge's getter name) and `get_<aggregate column>` standing for the getters.

/// One decision: a tool (or argument value) and whether the reference pool keeps it.
#[derive(Debug, Clone, Copy)]
pub struct Decision {
    /// The tool name, `tool.argument=value`, or a getter pattern (module docs).
    pub tool: &'static str,
    /// Whether reference-pool rows may call it.
    pub in_pool: bool,
    /// Why: the reference behaviour the decision follows (IBM's `invocable_api_hub`).
    pub why: &'static str,
}

const fn d(tool: &'static str, in_pool: bool, why: &'static str) -> Decision {
    Decision { tool, in_pool, why }
}

const COMPARE: &str = "IBM's filter_data compares as SQL does when the value has the column's kind, NULL rows are excluded and the column survives the CSV hand-off (rules in tools/reference.rs)";
const LIKE: &str = "IBM's compare_like_pattern swaps pattern and cell; LIKE '%text%' with plain ASCII text becomes contains, any other LIKE is outside the pool";
const NOT_LIKE: &str = "IBM has no not_like condition";
const BY_VALUES: &str =
    "a sort on a computed list (ORDER BY a - b): IBM's sort_data sorts by a column only and has no arithmetic tool";
const COLUMNS: &str = "a comparison between two columns of a row (WHERE T1.a > T2.b): IBM's filter_data compares a column with a value only";
const MEMBERSHIP: &str =
    "membership in an earlier list ([NOT] IN (SELECT …)): IBM has no such condition and holds one active table";
const AGG: &str = "IBM's aggregate_data matches SQL under the rules in tools/reference.rs (count without NULLs, sum/mean on numbers, integer min/max)";
const STD: &str = "no SQL aggregate lowers to it, and IBM's std is numpy's population std";
const ARG: &str = "no SQL aggregate lowers to it";
const GROUP: &str = "IBM's tools cannot aggregate grouped data (its aggregate_data on groups is commented out)";
const CASE: &str = "IBM's tools have no row-wise conditional value (SQL's CASE / IIF); the reference cannot express it";
const TRANSFORM: &str =
    "IBM has transform_data_to_substring only, which edits the table in place; no kept query needs a transform";
const CALCULATE: &str = "IBM has no arithmetic tool";
const ROW_EXPRESSION: &str = "IBM's tools have no row-wise expression or SQLite scalar function (arithmetic, CAST, ROUND, text and date functions)";
const COMBINE: &str = "IBM has no set operations; an OR whose branches share no row becomes concatenate_data";
const CONCAT: &str =
    "IBM's OR step: kept for an OR whose branches share no row on this data (otherwise it repeats rows)";
const SORT: &str = "IBM's sort_data, stable (mergesort), with an explicit direction; ascending only without NULLs (pandas puts NaN last)";
const RETRIEVE: &str =
    "IBM's retrieve_data (one key, distinct keeps first occurrences, limit slices) on a column the CSV hand-off keeps";
const UNIQUE_SLOT: &str = "toolforge's select_unique_values of several row-aligned lists (DISTINCT over several columns); IBM's takes one list";
const UNIQUE_SEL: &str = "IBM's select_unique_values of one getter's list (SELECT DISTINCT of a column)";
const TRUNCATE: &str = "IBM's truncate of one getter's list (LIMIT)";
const GETTER: &str = "IBM's create_getter: the list of a column of the joined table, named get_<column>s";
const PLURAL: &str = "toolforge's English-plural getter name; reference rows use IBM's get_<column>s";
const DISTINCT_NAME: &str = "toolforge binds distinct into the name; reference rows call compute_data_<agg> with distinct=true as IBM's builder does";
const AGG_GETTER: &str = "a per-group aggregate column exists only after grouping, which IBM cannot aggregate";

/// The SLOT tools and the categorical argument values of those in the pool.
pub const SLOT: &[Decision] = &[
    d("filter_data", true, COMPARE),
    d("filter_data.condition=equal_to", true, COMPARE),
    d(
        "filter_data.condition=not_equal_to",
        true,
        "as the other comparisons, only on a column without NULLs (pandas keeps NULL rows)",
    ),
    d("filter_data.condition=greater_than", true, COMPARE),
    d("filter_data.condition=less_than", true, COMPARE),
    d("filter_data.condition=greater_than_equal_to", true, COMPARE),
    d("filter_data.condition=less_than_equal_to", true, COMPARE),
    d(
        "filter_data.condition=contains",
        true,
        "IBM's str.contains (case-insensitive) on a text column, for plain ASCII text",
    ),
    d("filter_data.condition=like", false, LIKE),
    d("filter_data.condition=not_like", false, NOT_LIKE),
    d("filter_data.condition=is_in", false, MEMBERSHIP),
    d("filter_data.condition=not_in", false, MEMBERSHIP),
    d("filter_data.other_key_name", false, COLUMNS),
    d("sort_data", true, SORT),
    d("sort_data.by_values", false, BY_VALUES),
    d("aggregate_data", true, AGG),
    d("aggregate_data.aggregation_type=count", true, AGG),
    d("aggregate_data.aggregation_type=sum", true, AGG),
    d("aggregate_data.aggregation_type=mean", true, AGG),
    d("aggregate_data.aggregation_type=min", true, AGG),
    d("aggregate_data.aggregation_type=max", true, AGG),
    d("aggregate_data.aggregation_type=std", false, STD),
    d("aggregate_data.aggregation_type=argmin", false, ARG),
    d("aggregate_data.aggregation_type=argmax", false, ARG),
    d("retrieve_data", true, RETRIEVE),
    d("select_unique_values", false, UNIQUE_SLOT),
    d("transform_data", false, TRANSFORM),
    d("group_data_by", false, GROUP),
    d("concatenate_data", true, CONCAT),
    d("combine_data", false, COMBINE),
    d("calculate", false, CALCULATE),
];

/// The SEL tools (IBM's names where they differ, toolforge's extended names, getter patterns).
pub const SEL: &[Decision] = &[
    d("select_data_equal_to", true, COMPARE),
    d(
        "select_data_not_equal_to",
        true,
        "as the other comparisons, only on a column without NULLs (pandas keeps NULL rows)",
    ),
    d("select_data_greater_than", true, COMPARE),
    d("select_data_less_than", true, COMPARE),
    d("select_data_greater_than_equal_to", true, COMPARE),
    d("select_data_less_than_equal_to", true, COMPARE),
    d(
        "select_data_contains",
        true,
        "IBM's str.contains (case-insensitive) on a text column, for plain ASCII text",
    ),
    d("select_data_like", false, LIKE),
    d("select_data_not_like", false, NOT_LIKE),
    d("select_data_is_in", false, MEMBERSHIP),
    d("select_data_not_in", false, MEMBERSHIP),
    d("sort_data_ascending", true, SORT),
    d("sort_data_descending", true, SORT),
    d("compute_data_count", true, AGG),
    d("compute_data_sum", true, AGG),
    d("compute_data_mean", true, AGG),
    d("compute_data_min", true, AGG),
    d("compute_data_max", true, AGG),
    d("compute_data_std", false, STD),
    d("compute_data_argmin", false, ARG),
    d("compute_data_argmax", false, ARG),
    d("compute_data_count_distinct", false, DISTINCT_NAME),
    d("compute_data_sum_distinct", false, DISTINCT_NAME),
    d("compute_data_mean_distinct", false, DISTINCT_NAME),
    d("compute_data_min_distinct", false, DISTINCT_NAME),
    d("compute_data_max_distinct", false, DISTINCT_NAME),
    d("compute_data_std_distinct", false, STD),
    d("compute_data_argmin_distinct", false, ARG),
    d("compute_data_argmax_distinct", false, ARG),
    d("transform_data_substring", false, TRANSFORM),
    d("transform_data_abs", false, TRANSFORM),
    d("transform_data_datetime", false, TRANSFORM),
    d("transform_data_case", false, CASE),
    d("transform_data_arithmetic", false, ROW_EXPRESSION),
    d("transform_data_cast", false, ROW_EXPRESSION),
    d("transform_data_round", false, ROW_EXPRESSION),
    d("transform_data_length", false, ROW_EXPRESSION),
    d("transform_data_upper", false, ROW_EXPRESSION),
    d("transform_data_lower", false, ROW_EXPRESSION),
    d("transform_data_instr", false, ROW_EXPRESSION),
    d("transform_data_replace", false, ROW_EXPRESSION),
    d("transform_data_trim", false, ROW_EXPRESSION),
    d("transform_data_julianday", false, ROW_EXPRESSION),
    d("transform_data_strftime", false, ROW_EXPRESSION),
    d("calculate_add", false, CALCULATE),
    d("calculate_subtract", false, CALCULATE),
    d("calculate_multiply", false, CALCULATE),
    d("calculate_divide", false, CALCULATE),
    d("calculate_round", false, CALCULATE),
    d("combine_data_union", false, COMBINE),
    d("combine_data_union_all", false, COMBINE),
    d("combine_data_intersect", false, COMBINE),
    d("combine_data_except", false, COMBINE),
    d("combine_data_either", false, COMBINE),
    d("concatenate_data", true, CONCAT),
    d("group_data_by", false, GROUP),
    d("select_unique_values", true, UNIQUE_SEL),
    d("truncate", true, TRUNCATE),
    d("get_<column>s", true, GETTER),
    d("get_<English plural>", false, PLURAL),
    d("get_<aggregate column>", false, AGG_GETTER),
];

/// Why the decision on `key` (a [`SLOT`] or [`SEL`] key) is what it is; empty when undecided.
pub fn why(key: &str) -> &'static str {
    SLOT.iter().chain(SEL).find(|d| d.tool == key).map_or("", |d| d.why)
}

/// The decision for SEL tool `name` (a getter by its pattern only: see [`SEL`]).
pub fn sel(name: &str) -> Option<&'static Decision> {
    SEL.iter().find(|d| d.tool == name)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::tools::pool::{AGGREGATE_COLUMNS, KeyDescription, slot_tools};
    use crate::tools::sel::{getter_name, sel_tools};

    fn decided<'a>(table: &'a [Decision], key: &str) -> Option<&'a Decision> {
        table.iter().find(|d| d.tool == key)
    }

    /// A SLOT tool, or a categorical value of an in-pool SLOT tool, without a decision fails
    /// here: adding one to the pool means deciding whether IBM's tools run it faithfully.
    #[test]
    fn every_slot_tool_and_categorical_value_has_a_reference_pool_decision() {
        let keys = [KeyDescription {
            key_name: "t_c".into(),
            description: "c".into(),
            dtype: "string".into(),
        }];
        let mut missing = Vec::new();
        for t in slot_tools(Some(&keys)) {
            let Some(tool) = decided(SLOT, &t.name) else {
                missing.push(t.name.clone());
                continue;
            };
            if !tool.in_pool {
                continue;
            }
            let props = t.parameters["properties"].as_object().cloned().unwrap_or_default();
            // Column names are not categorical; an argument decided as a whole (`tool.argument`)
            // needs no decision per value.
            let whole = |a: &str| decided(SLOT, &format!("{}.{a}", t.name)).is_some();
            for (arg, schema) in props.iter().filter(|(a, _)| *a != "key_name" && !whole(a)) {
                for v in schema.get("enum").and_then(Value::as_array).into_iter().flatten() {
                    let key = format!("{}.{arg}={}", t.name, v.as_str().unwrap_or_default());
                    if decided(SLOT, &key).is_none() {
                        missing.push(key);
                    }
                }
            }
        }
        assert!(
            missing.is_empty(),
            "no reference-pool decision for {missing:?} (tools/reference/decisions.rs)"
        );
        for d in SLOT.iter().chain(SEL) {
            assert!(!d.why.is_empty(), "{} has a reason", d.tool);
        }
    }

    /// The same for every SEL tool name (getters by pattern), and the reference SEL toolkit
    /// offers exactly the in-pool SEL tools (getters under IBM's names).
    #[test]
    fn every_sel_tool_has_a_reference_pool_decision() {
        let keys = [KeyDescription {
            key_name: "TV_Channel_Country".into(),
            description: "c".into(),
            dtype: "string".into(),
        }];
        let mut missing = Vec::new();
        for t in sel_tools(Some(&keys)) {
            let pattern = if keys.iter().any(|k| getter_name(&k.key_name) == t.name) {
                "get_<English plural>".to_string()
            } else if AGGREGATE_COLUMNS.iter().any(|a| getter_name(a) == t.name) {
                "get_<aggregate column>".to_string()
            } else {
                t.name.clone()
            };
            if sel(&pattern).is_none() {
                missing.push(t.name.clone());
            }
        }
        assert!(
            missing.is_empty(),
            "no reference-pool decision for {missing:?} (tools/reference/decisions.rs)"
        );
        let offered: Vec<String> = super::super::sel::tools(Some(&keys))
            .into_iter()
            .map(|t| {
                if t.name == super::super::sel::getter_name(&keys[0].key_name) {
                    "get_<column>s".into()
                } else {
                    t.name
                }
            })
            .collect();
        let in_pool: Vec<&str> = SEL.iter().filter(|d| d.in_pool).map(|d| d.tool).collect();
        assert_eq!(offered.len(), in_pool.len(), "{offered:?} vs {in_pool:?}");
        for n in in_pool {
            assert!(
                offered.iter().any(|o| o == n),
                "{n} offered by the reference SEL toolkit"
            );
        }
    }
}
