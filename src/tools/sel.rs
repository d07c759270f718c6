//! SEL: the SLOT tools with their categorical arguments bound into function names (Live
//! API-Bench §3 "SEL"; names as the reference `sequencing_tools.py` builds them):
//!
//! | SLOT call                                        | SEL call(s)                                      |
//! |--------------------------------------------------|--------------------------------------------------|
//! | `filter_data(…, condition=c)`                    | `select_data_<c>(data_source, key_name, value \| other_key_name)` |
//! | `sort_data(…, ascending=true/false)`             | `sort_data_ascending` / `sort_data_descending`   |
//! | `aggregate_data(…, aggregation_type=a, distinct=d)` | `compute_data_<a>(data_source, key_name)`, `compute_data_<a>_distinct` when `d` |
//! | `combine_data(…, operation=o)`                   | `combine_data_<o>(data_source_1, data_source_2)` |
//! | `transform_data(…, operation_type=t)`            | `transform_data_<t>(data_source, key_name, operation_args)` |
//! | `calculate(…, operator=o)`                       | `calculate_<o>(operand_a, operand_b)`            |
//! | `retrieve_data(data_source, key_name=k, distinct, limit)` | `get_<plural of k>(data_source)`, then `select_unique_values` when distinct, then `truncate(truncate_array, n)` when limited |
//!
//! Every categorical argument is bound into a name (§3.2). Getter names read as English plurals
//! of the column name ([`getter_name`]: `get_TV_Channel_Countries`, `get_addresses`); [`unbind`]
//! reverses them against the columns of the table the getter reads. Every other tool keeps its
//! name and arguments. A model sees one getter per column of the
//! instance's joined table (with the column's description), so each instance carries its own
//! toolkit ([`sel_tools`]). [`bind`] rewrites a SLOT sequence into SEL (references to an expanded
//! call are redirected to its last step); [`unbind`] maps one SEL call back to the SLOT tool the
//! executor runs.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::pool::{
    AGGREGATE_COLUMNS, AGGREGATIONS, COMBINE_OPERATIONS, COMPARISONS, CONDITIONS, KeyDescription, OPERATORS,
    TRANSFORMS, slot_tools,
};
use super::{Call, ToolSpec, as_label_ref, label_ref};

/// The getter name of a column: `get_<plural of key>`, the English plural of its last letters
/// (`Country` → `Countries`, `address` → `addresses`, `status` → `statuses`, `Name` → `Names`),
/// in the case of the key's last letter; a key already plural (`Cylinders`, ending in a single
/// `s`) is kept as is; a trailing acronym of up to 3 capitals takes `s` (`Stadium_ID` →
/// `Stadium_IDs`, `GNP` → `GNPs`).
pub fn getter_name(key: &str) -> String {
    let lower = key.to_lowercase();
    let upper = key.chars().last().is_some_and(char::is_uppercase);
    // The last word: the trailing run of letters of the last letter's case.
    let word = key
        .chars()
        .rev()
        .take_while(|c| c.is_alphabetic() && c.is_uppercase() == upper)
        .count();
    if upper && word <= 3 {
        return format!("get_{key}s");
    }
    let case = |s: &str| if upper { s.to_uppercase() } else { s.to_string() };
    let before_y = lower.chars().rev().nth(1);
    if word >= 3 && lower.ends_with('y') && before_y.is_some_and(|c| c.is_ascii_alphabetic() && !"aeiou".contains(c)) {
        return format!("get_{}{}", &key[..key.len() - 1], case("ies"));
    }
    if ["ss", "us", "is", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| lower.ends_with(e))
    {
        return format!("get_{key}{}", case("es"));
    }
    if lower.ends_with('s') {
        return format!("get_{key}");
    }
    format!("get_{key}{}", case("s"))
}

fn unique_label(used: &mut HashMap<String, usize>, base: &str) -> String {
    let n = used.entry(base.to_string()).or_insert(0);
    let label = if *n == 0 {
        base.to_string()
    } else {
        format!("{base}_{n}")
    };
    *n += 1;
    label
}

/// Rewrites a SLOT call sequence into SEL calls (table in the module docs).
pub fn bind(slot: &[Call]) -> Vec<Call> {
    let mut out: Vec<Call> = Vec::new();
    let mut used: HashMap<String, usize> = HashMap::new();
    for c in slot {
        used.insert(c.label.clone(), 1);
    }
    // label of a SLOT call → label of the SEL call that now holds its output
    let mut renamed: HashMap<String, String> = HashMap::new();
    for c in slot {
        let mut args: Map<String, Value> = c
            .arguments
            .iter()
            .map(|(k, v)| {
                let redirect = |v: &Value| match as_label_ref(v).and_then(|l| renamed.get(l)) {
                    Some(new) => json!(label_ref(new)),
                    None => v.clone(),
                };
                let v = match v {
                    Value::Array(items) => Value::Array(items.iter().map(redirect).collect()),
                    other => redirect(other),
                };
                (k.clone(), v)
            })
            .collect();
        let push = |out: &mut Vec<Call>, name: String, arguments: Map<String, Value>, label: String| {
            out.push(Call { name, arguments, label });
        };
        match c.name.as_str() {
            "filter_data" => {
                let cond = args.remove("condition").and_then(|v| v.as_str().map(String::from));
                push(
                    &mut out,
                    format!("select_data_{}", cond.unwrap_or_default()),
                    args,
                    c.label.clone(),
                );
            }
            "combine_data" => {
                let op = args.remove("operation").and_then(|v| v.as_str().map(String::from));
                push(
                    &mut out,
                    format!("combine_data_{}", op.unwrap_or_default()),
                    args,
                    c.label.clone(),
                );
            }
            "sort_data" => {
                let asc = args.remove("ascending").and_then(|v| v.as_bool()).unwrap_or(false);
                let name = if asc {
                    "sort_data_ascending"
                } else {
                    "sort_data_descending"
                };
                push(&mut out, name.into(), args, c.label.clone());
            }
            "transform_data" => {
                let op = args.remove("operation_type").and_then(|v| v.as_str().map(String::from));
                push(
                    &mut out,
                    format!("transform_data_{}", op.unwrap_or_default()),
                    args,
                    c.label.clone(),
                );
            }
            "calculate" => {
                let op = args.remove("operator").and_then(|v| v.as_str().map(String::from));
                push(
                    &mut out,
                    format!("calculate_{}", op.unwrap_or_default()),
                    args,
                    c.label.clone(),
                );
            }
            "aggregate_data" => {
                let agg = args
                    .remove("aggregation_type")
                    .and_then(|v| v.as_str().map(String::from));
                let distinct = args.remove("distinct").and_then(|v| v.as_bool()).unwrap_or(false);
                if args.get("limit").and_then(Value::as_i64) == Some(-1) {
                    args.remove("limit");
                }
                if args.get("key_name").and_then(Value::as_str) == Some("") {
                    args.remove("key_name");
                }
                push(
                    &mut out,
                    format!(
                        "compute_data_{}{}",
                        agg.unwrap_or_default(),
                        if distinct { "_distinct" } else { "" }
                    ),
                    args,
                    c.label.clone(),
                );
            }
            "retrieve_data" => {
                let key = args
                    .get("key_name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let distinct = args.get("distinct").and_then(Value::as_bool).unwrap_or(false);
                let limit = args.get("limit").and_then(Value::as_i64).unwrap_or(-1);
                let offset = args.get("offset").and_then(Value::as_i64).filter(|&m| m > 0);
                let mut getter = Map::new();
                getter.insert(
                    "data_source".into(),
                    args.get("data_source").cloned().unwrap_or(Value::Null),
                );
                let mut last = c.label.clone();
                push(&mut out, getter_name(&key), getter, last.clone());
                if distinct {
                    let label = unique_label(&mut used, &c.label.replace("SELECT_COL", "DISTINCT_COL"));
                    let mut a = Map::new();
                    a.insert("unique_array".into(), json!(label_ref(&last)));
                    push(&mut out, "select_unique_values".into(), a, label.clone());
                    last = label;
                }
                if limit >= 0 {
                    let label = unique_label(&mut used, "LIMIT");
                    let mut a = Map::new();
                    a.insert("truncate_array".into(), json!(label_ref(&last)));
                    a.insert("n".into(), json!(limit));
                    if let Some(m) = offset {
                        a.insert("offset".into(), json!(m));
                    }
                    push(&mut out, "truncate".into(), a, label.clone());
                    last = label;
                }
                if last != c.label {
                    renamed.insert(c.label.clone(), last);
                }
            }
            _ => push(&mut out, c.name.clone(), args, c.label.clone()),
        }
    }
    out
}

/// Maps a SEL call back to the SLOT tool the executor runs; other calls are returned unchanged.
/// `columns` are the columns of the table a getter reads (its `data_source`): a getter
/// `get_<plural>` is the column whose [`getter_name`] it is (or a per-group aggregate column);
/// a getter matching none is read as `get_<key>s` (rows built before English plurals).
pub fn unbind(call: &Call, columns: &[String]) -> Call {
    let mut args = call.arguments.clone();
    let name = call.name.as_str();
    let slot = |name: &str, args: Map<String, Value>| Call {
        name: name.into(),
        arguments: args,
        label: call.label.clone(),
    };
    if let Some(cond) = name.strip_prefix("select_data_").filter(|c| CONDITIONS.contains(c)) {
        args.insert("condition".into(), json!(cond));
        return slot("filter_data", args);
    }
    if let Some(dir) = name
        .strip_prefix("sort_data_")
        .filter(|d| *d == "ascending" || *d == "descending")
    {
        args.insert("ascending".into(), json!(dir == "ascending"));
        return slot("sort_data", args);
    }
    if let Some(op) = name
        .strip_prefix("combine_data_")
        .filter(|o| COMBINE_OPERATIONS.contains(o))
    {
        args.insert("operation".into(), json!(op));
        return slot("combine_data", args);
    }
    if let Some(bound) = name.strip_prefix("compute_data_") {
        let (agg, distinct) = match bound.strip_suffix("_distinct") {
            Some(a) => (a, true),
            None => (bound, false),
        };
        if AGGREGATIONS.contains(&agg) {
            args.insert("aggregation_type".into(), json!(agg));
            args.entry("distinct").or_insert(json!(distinct));
            return slot("aggregate_data", args);
        }
    }
    if let Some(op) = name.strip_prefix("transform_data_").filter(|o| TRANSFORMS.contains(o)) {
        args.insert("operation_type".into(), json!(op));
        return slot("transform_data", args);
    }
    if let Some(op) = name.strip_prefix("calculate_").filter(|o| OPERATORS.contains(o)) {
        args.insert("operator".into(), json!(op));
        return slot("calculate", args);
    }
    if name.starts_with("get_") {
        let known = columns
            .iter()
            .map(String::as_str)
            .chain(AGGREGATE_COLUMNS)
            .find(|k| getter_name(k) == name);
        let key = known.or_else(|| name.strip_prefix("get_").and_then(|k| k.strip_suffix('s')));
        if let Some(key) = key {
            args.insert("key_name".into(), json!(key));
            return slot("retrieve_data", args);
        }
    }
    call.clone()
}

fn combine_description(op: &str) -> &'static str {
    match op {
        "union" => "the distinct rows of both (SQL UNION)",
        "union_all" => "every row of both (SQL UNION ALL)",
        "intersect" => "the distinct rows of the first that the second holds (SQL INTERSECT)",
        "except" => "the distinct rows of the first that the second lacks (SQL EXCEPT)",
        _ => "the rows of two filters of one table, each row once (an OR of the filters)",
    }
}

fn without(spec: &ToolSpec, name: String, description: String, drop: &[&str]) -> ToolSpec {
    let mut parameters = spec.parameters.clone();
    if let Some(props) = parameters["properties"].as_object_mut() {
        for d in drop {
            props.remove(*d);
        }
    }
    if let Some(req) = parameters["required"].as_array_mut() {
        req.retain(|r| !drop.contains(&r.as_str().unwrap_or_default()));
    }
    ToolSpec {
        name,
        description,
        parameters,
        output_parameters: spec.output_parameters.clone(),
    }
}

/// The SEL getter of column `key` (`get_<key>s`, reading that column of `data_source`), with
/// the column's description and OpenAPI type.
pub fn getter(key: &str, description: &str, dtype: &str) -> ToolSpec {
    ToolSpec {
        name: getter_name(key),
        description: format!("Lookup data {key}: {description}"),
        parameters: json!({"type": "object", "properties": {
            "data_source": {"type": "string", "description": "The table (or grouped table) to read, given as the `$LABEL$` of an earlier output."}
        }, "required": ["data_source"]}),
        output_parameters: json!({"type": "object", "properties": {"output_0": {"type": "array", "items": {"type": dtype}, "description": format!("The {key} values.")}}}),
    }
}

/// The SEL toolkit of an instance: bound filters, sorts and aggregations, `truncate`, the
/// unbound helpers, and one getter per joined-table column plus one per per-group aggregate
/// column. With `keys = None`, the dataset-level catalog (no getters).
pub fn sel_tools(keys: Option<&[KeyDescription]>) -> Vec<ToolSpec> {
    let slot = slot_tools(keys);
    let find = |n: &str| slot.iter().find(|t| t.name == n).expect("SLOT tool").clone();
    let mut out = Vec::new();
    let filter = find("filter_data");
    for c in CONDITIONS {
        out.push(without(
            &filter,
            format!("select_data_{c}"),
            format!(
                "Keep the rows of a table whose column value is {} the value{}. NULL cells never match.",
                c.replace('_', " "),
                if COMPARISONS.contains(&c) {
                    " (or the value of another column of the same row, `other_key_name`)"
                } else {
                    ""
                }
            ),
            &["condition"],
        ));
    }
    let sort = find("sort_data");
    for dir in ["ascending", "descending"] {
        out.push(without(
            &sort,
            format!("sort_data_{dir}"),
            format!("Sort a table by a column (or by `by_values`, a list with one value per row) in {dir} order (stable; NULL sorts before every value)."),
            &["ascending"],
        ));
    }
    let agg = find("aggregate_data");
    for a in AGGREGATIONS {
        for (suffix, what) in [("", "values"), ("_distinct", "distinct values")] {
            out.push(without(
                &agg,
                format!("compute_data_{a}{suffix}"),
                format!("Return the {a} of the {what} of a column (NULLs skipped); on grouped data, a table with one {a} per group in a column named `{a}`."),
                &["aggregation_type", "limit", "distinct"],
            ));
        }
    }
    let transform = find("transform_data");
    for t in TRANSFORMS {
        let args = match t {
            "substring" => "`operation_args` {start_index, end_index} (0-based, end exclusive)",
            "datetime" => "`operation_args` {pattern: \"%Y\"|\"%m\"|\"%d\"}",
            "case" => {
                "`operation_args` {when: [{conditions: [[condition, …], …], then}], else} (SQL's CASE; `key_name` is the column written)"
            }
            "arithmetic" => {
                "`operation_args` {operator: \"add\"|\"subtract\"|\"multiply\"|\"divide\"|\"concat\", other_key_name | value} (SQLite's arithmetic with the same row's value)"
            }
            "cast" => "`operation_args` {type: \"integer\"|\"real\"|\"numeric\"|\"text\"} (SQLite's CAST)",
            "round" => "`operation_args` {digits} (half away from zero)",
            "instr" => "`operation_args` {substring} (1-based position, 0 when absent)",
            "replace" => "`operation_args` {pattern, replacement}",
            "trim" => "`operation_args` {characters, side: \"both\"|\"left\"|\"right\"}",
            "strftime" => "`operation_args` {format} (SQLite's strftime)",
            _ => "no `operation_args`",
        };
        out.push(without(
            &transform,
            format!("transform_data_{t}"),
            format!("Replace a column by the `{t}` of its values (or write it to `output_key_name`); {args}."),
            &["operation_type"],
        ));
    }
    let calculate = find("calculate");
    for o in OPERATORS {
        out.push(without(
            &calculate,
            format!("calculate_{o}"),
            format!("Arithmetic `operand_a {o} operand_b` between two numbers, single values or lists (elementwise), with SQLite's rules (integer by integer division truncates, by zero gives null; `round` is half away from zero to operand_b decimals)."),
            &["operator"],
        ));
    }
    let combine = find("combine_data");
    for o in COMBINE_OPERATIONS {
        out.push(without(
            &combine,
            format!("combine_data_{o}"),
            format!(
                "Combine two tables (or two row-aligned lists of `$LABEL$`s of lists) row-wise: {}.",
                combine_description(o)
            ),
            &["operation"],
        ));
    }
    out.push(ToolSpec {
        name: "truncate".into(),
        description: "Keep the first n values of a list (after skipping the first `offset`).".into(),
        parameters: json!({"type": "object", "properties": {
            "truncate_array": {"type": "string", "description": "The list, given as the `$LABEL$` of an earlier output."},
            "n": {"type": "integer", "description": "How many values to keep."},
            "offset": {"type": "integer", "minimum": 0, "description": "How many values to skip first (SQL's OFFSET).", "default": 0}
        }, "required": ["truncate_array", "n"]}),
        output_parameters: json!({"type": "object", "properties": {"output_0": {"description": "The first n values."}}}),
    });
    for name in ["group_data_by", "select_unique_values", "concatenate_data"] {
        out.push(find(name));
    }
    if let Some(keys) = keys {
        let getters = keys
            .iter()
            .map(|k| (k.key_name.clone(), k.description.clone(), k.dtype.clone()))
            .chain(AGGREGATE_COLUMNS.iter().map(|a| {
                (
                    a.to_string(),
                    format!("the per-group `{a}` computed by compute_data_{a} on grouped data"),
                    "number".into(),
                )
            }));
        for (key, description, dtype) in getters {
            out.push(getter(&key, &description, &dtype));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: Value, label: &str) -> Call {
        Call {
            name: name.into(),
            arguments: args.as_object().unwrap().clone(),
            label: label.into(),
        }
    }

    #[test]
    fn bind_expands_retrieve_and_redirects_references() {
        let slot = vec![
            call(
                "filter_data",
                json!({"data_source": "$t$", "key_name": "a", "value": 1, "condition": "greater_than"}),
                "F",
            ),
            call(
                "retrieve_data",
                json!({"data_source": "$F$", "key_name": "a", "distinct": true, "limit": 3}),
                "SELECT_COL_0",
            ),
            call(
                "calculate",
                json!({"operand_a": "$SELECT_COL_0$", "operand_b": 2, "operator": "add"}),
                "C",
            ),
        ];
        let sel = bind(&slot);
        let names: Vec<&str> = sel.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "select_data_greater_than",
                "get_as",
                "select_unique_values",
                "truncate",
                "calculate_add"
            ]
        );
        assert_eq!(sel[4].arguments["operand_a"], json!("$LIMIT$"));
        assert_eq!(sel[2].label, "DISTINCT_COL_0");
        for (s, u) in [(0, "filter_data"), (1, "retrieve_data"), (4, "calculate")] {
            assert_eq!(unbind(&sel[s], &["a".into()]).name, u);
        }
        assert_eq!(unbind(&sel[0], &[]).arguments, slot[0].arguments);
        assert_eq!(unbind(&sel[4], &[]).arguments["operator"], json!("add"));
    }

    /// Item 8: `transform_data.operation_type`, `aggregate_data.distinct` and
    /// `calculate.operator` were left as arguments; every categorical argument is now in the name,
    /// and unbinding restores the SLOT call.
    #[test]
    fn sel_binds_every_categorical_argument() {
        let slot = vec![
            call(
                "transform_data",
                json!({"data_source": "$t$", "key_name": "d", "operation_type": "substring", "operation_args": {"start_index": 0, "end_index": 4}}),
                "T",
            ),
            call(
                "aggregate_data",
                json!({"data_source": "$T$", "key_name": "d", "aggregation_type": "count", "distinct": true, "limit": -1}),
                "COUNT",
            ),
            call(
                "aggregate_data",
                json!({"data_source": "$T$", "key_name": "d", "aggregation_type": "count", "distinct": false, "limit": -1}),
                "COUNT_1",
            ),
            call(
                "calculate",
                json!({"operand_a": "$COUNT$", "operand_b": "$COUNT_1$", "operator": "divide"}),
                "C",
            ),
        ];
        let sel = bind(&slot);
        let names: Vec<&str> = sel.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "transform_data_substring",
                "compute_data_count_distinct",
                "compute_data_count",
                "calculate_divide"
            ]
        );
        let categorical = [
            "operation_type",
            "distinct",
            "operator",
            "aggregation_type",
            "condition",
            "ascending",
            "operation",
        ];
        for c in &sel {
            assert!(categorical.iter().all(|k| !c.arguments.contains_key(*k)), "{c:?}");
        }
        for (s, u) in sel.iter().zip(&slot) {
            let back = unbind(s, &[]);
            assert_eq!(back.name, u.name);
            for (k, v) in &back.arguments {
                assert_eq!(Some(v), u.arguments.get(k), "{k} of {}", u.name);
            }
        }
        let tools = sel_tools(None);
        for n in names {
            assert!(tools.iter().any(|t| t.name == n), "{n} in the SEL catalog");
        }
        assert!(
            !tools
                .iter()
                .any(|t| t.name == "calculate" || t.name == "transform_data")
        );
    }

    /// Item 8: getter names were `get_<key>s` (`get_TV_Channel_Countrys`); they are English
    /// plurals, and unbinding finds the column among the table's columns.
    #[test]
    fn getter_names_are_english_plurals() {
        for (key, getter) in [
            ("TV_Channel_Country", "get_TV_Channel_Countries"),
            ("address", "get_addresses"),
            ("Name", "get_Names"),
            ("day", "get_days"),
            ("CITY", "get_CITIES"),
            ("match", "get_matches"),
            ("tax", "get_taxes"),
            ("status", "get_statuses"),
            ("Cylinders", "get_Cylinders"),
            ("Stadium_ID", "get_Stadium_IDs"),
            ("StuID", "get_StuIDs"),
            ("GNP", "get_GNPs"),
            ("Directed_by", "get_Directed_bys"),
            ("count", "get_counts"),
        ] {
            assert_eq!(getter_name(key), getter);
            let columns = vec!["other".to_string(), key.to_string()];
            let c = call(getter, json!({"data_source": "$t$"}), "G");
            let back = unbind(&c, &columns);
            assert_eq!(back.name, "retrieve_data");
            assert_eq!(back.arguments["key_name"], json!(key));
        }
        // A per-group aggregate column is found without being a table column.
        let c = call("get_means", json!({"data_source": "$t$"}), "G");
        assert_eq!(unbind(&c, &[]).arguments["key_name"], json!("mean"));
    }
}
