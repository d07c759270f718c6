//! The SLOT tool pool as data (Live API-Bench §3, "SLOT"): each tool defined once as a
//! [`ToolSpec`]; per-instance toolkits differ only in the `key_name` enum and its description
//! (the instance's joined-table columns), the dataset-level catalog has no enum.
//!
//! `concatenate_data` (the reference's OR step), `combine_data` (SQL set operations, and OR
//! without duplicated rows) and `calculate` (arithmetic between aggregates or columns) extend
//! the reference's seven tools, as do the `filter_data` conditions `not_like`, `is_in` and
//! `not_in` (membership in an earlier list: `[NOT] IN (SELECT …)`) and its `other_key_name`
//! (a comparison between two columns of a row: `WHERE T1.a > T2.b`), and `sort_data`'s
//! `by_values` (a sort on a computed list: `ORDER BY a - b`); `initialize_active_data` is the instance's
//! setup step and is not part of the toolkit shown to a model.
//!
//! Schemas stay in the subset every function-calling API and chat template accepts: a value of
//! several types is an `anyOf` of single-type schemas, never a `type` array (Hermes and Granite
//! templates recurse forever on `"type": [..., "null"]`; issue 29).

use serde_json::{Value, json};

use super::ToolSpec;

/// Names of the per-group result columns of `aggregate_data` on grouped data; they are valid
/// `key_name`s of the tools that read tables.
pub const AGGREGATE_COLUMNS: [&str; 6] = ["min", "max", "sum", "mean", "count", "std"];

/// The conditions of `filter_data`.
pub const CONDITIONS: [&str; 11] = [
    "equal_to",
    "not_equal_to",
    "greater_than",
    "less_than",
    "greater_than_equal_to",
    "less_than_equal_to",
    "contains",
    "like",
    "not_like",
    "is_in",
    "not_in",
];

/// The comparison conditions of `filter_data` (equality and order): the ones that can compare two
/// columns (`other_key_name`), and the ones IBM's reference tools run as SQL does.
pub const COMPARISONS: [&str; 6] = [
    "equal_to",
    "not_equal_to",
    "greater_than",
    "less_than",
    "greater_than_equal_to",
    "less_than_equal_to",
];

/// `transform_data` operations (`operation_type`).
pub const TRANSFORMS: [&str; 15] = [
    "substring",
    "abs",
    "datetime",
    "case",
    "arithmetic",
    "cast",
    "round",
    "length",
    "upper",
    "lower",
    "instr",
    "replace",
    "trim",
    "julianday",
    "strftime",
];

/// `calculate` operators.
pub const OPERATORS: [&str; 5] = ["add", "subtract", "multiply", "divide", "round"];

/// The operations of `combine_data`.
pub const COMBINE_OPERATIONS: [&str; 5] = ["union", "union_all", "intersect", "except", "either"];

/// The aggregation types of `aggregate_data`.
pub const AGGREGATIONS: [&str; 8] = ["min", "max", "sum", "mean", "count", "std", "argmin", "argmax"];

/// One column of an instance's joined table, as shown to the model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KeyDescription {
    /// Column name in the joined table (`<table>_<column>`).
    pub key_name: String,
    /// Column description (BIRD `database_description/*.csv`, Spider `tables.json` names).
    pub description: String,
    /// OpenAPI type of the column (`integer`, `number`, `string`).
    pub dtype: String,
}

fn data_source(what: &str) -> Value {
    json!({"type": "string", "description": format!("{what}, given as the `$LABEL$` of an earlier output.")})
}

fn key_name(keys: Option<&[KeyDescription]>, with_aggregates: bool) -> Value {
    let mut schema = json!({"type": "string", "description": "The name of the column (key) to operate on."});
    if let Some(keys) = keys {
        let mut names: Vec<String> = keys.iter().map(|k| k.key_name.clone()).collect();
        let mut desc = String::from("The name of the column (key) to operate on:\n");
        for k in keys {
            desc.push_str(&format!("* `{}` - {}\n", k.key_name, k.description));
        }
        if with_aggregates {
            names.extend(AGGREGATE_COLUMNS.iter().map(|s| s.to_string()));
            desc.push_str("* `min`, `max`, `sum`, `mean`, `count`, `std` - the per-group result of `aggregate_data` on grouped data\n");
        }
        schema = json!({"type": "string", "enum": names, "description": desc});
    }
    schema
}

/// `filter_data`'s `other_key_name`: the column of the same row compared with instead of a value
/// (`WHERE T1.a > T2.b`), from the same enum as `key_name`.
fn other_key_name(keys: Option<&[KeyDescription]>) -> Value {
    let mut schema = key_name(keys, true);
    schema["description"] = json!(
        "Instead of `value`: the name of another column of the same table whose value, in the same row, is compared with (one of the `key_name` columns)."
    );
    schema
}

/// `group_data_by`'s `key_name`: one column, or a non-empty list of columns (a multi-key GROUP BY).
fn group_keys(keys: Option<&[KeyDescription]>) -> Value {
    let one = key_name(keys, false);
    let mut item = one.clone();
    item["description"] = json!("A column (key) to group by.");
    json!({
        "anyOf": [one, {"type": "array", "items": item, "minItems": 1}],
        "description": "The column (key) to group by, or a list of columns to group by their combined values.",
    })
}

fn spec(name: &str, description: &str, properties: Value, required: &[&str], output: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters: json!({"type": "object", "properties": properties, "required": required}),
        output_parameters: json!({"type": "object", "properties": {"output_0": {"description": output}}}),
    }
}

/// The SLOT toolkit. With `keys`, the instance toolkit (`key_name` enums from the joined table);
/// without, the dataset-level catalog.
pub fn slot_tools(keys: Option<&[KeyDescription]>) -> Vec<ToolSpec> {
    let limit =
        json!({"type": "integer", "description": "Keep only the first `limit` values; -1 keeps all.", "default": -1});
    let distinct =
        json!({"type": "boolean", "description": "Keep only the first occurrence of each value.", "default": false});
    let offset = json!({"type": "integer", "minimum": 0, "description": "Skip the first `offset` values before `limit` applies (SQL's OFFSET).", "default": 0});
    vec![
        spec(
            "filter_data",
            "Keep the rows of a table whose column value satisfies a condition against a value, or against another column of the same row (`other_key_name` instead of `value`: a comparison from equal_to to less_than_equal_to). NULL cells never satisfy a comparison; a null value tests IS NULL (equal_to) or IS NOT NULL (not_equal_to). `contains` is a case-insensitive substring test, `like`/`not_like` are SQL LIKE / NOT LIKE. The value may be the `$LABEL$` of an earlier single value; `is_in`/`not_in` test membership in an earlier list (or one-column table) given as its `$LABEL$` (`not_in` a list holding null keeps no row, as in SQL).",
            json!({
                "data_source": data_source("The table to filter"),
                "key_name": key_name(keys, true),
                "value": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}], "description": "The value to compare with, or the `$LABEL$` of an earlier single value or (is_in, not_in) list. Give either `value` or `other_key_name`."},
                "other_key_name": other_key_name(keys),
                "condition": {"type": "string", "enum": CONDITIONS, "description": "The comparison to apply."},
            }),
            &["data_source", "key_name", "condition"],
            "The filtered table.",
        ),
        spec(
            "retrieve_data",
            "Return the values of one column of a table as a list (on grouped data: one value per group).",
            json!({
                "data_source": data_source("The table (or grouped table) to read"),
                "key_name": key_name(keys, true),
                "distinct": distinct,
                "limit": limit,
                "offset": offset,
            }),
            &["data_source", "key_name"],
            "The list of values.",
        ),
        spec(
            "aggregate_data",
            "Aggregate the values of a column (NULLs skipped). `count` with no key_name counts rows; `argmin`/`argmax` give the 0-based position of the first extreme. On grouped data, returns a table with the group key and one column named after the aggregation, one row per group.",
            json!({
                "data_source": data_source("The table, grouped table or list to aggregate"),
                "aggregation_type": {"type": "string", "enum": AGGREGATIONS, "description": "The aggregation to compute."},
                "key_name": key_name(keys, false),
                "distinct": distinct,
                "limit": limit,
            }),
            &["data_source", "aggregation_type"],
            "The aggregated value, or a table of per-group values.",
        ),
        spec(
            "sort_data",
            "Sort a table by a column, or by a list with one value per row (`by_values` instead of `key_name`: e.g. the `calculate` result of two of its columns, for an arithmetic sort key); stable, NULL sorts before every value.",
            json!({
                "data_source": data_source("The table to sort"),
                "key_name": key_name(keys, true),
                "by_values": {"type": "string", "description": "Instead of `key_name`: the `$LABEL$` of an earlier list holding one value per row of the table, in row order (e.g. `calculate` over two of its columns), to sort by."},
                "ascending": {"type": "boolean", "description": "Smallest first when true, largest first when false.", "default": false},
            }),
            &["data_source"],
            "The sorted table.",
        ),
        spec(
            "group_data_by",
            "Group the rows of a table by the values of a column, or by several columns given as a list (one group per distinct combination of their values); NULLs form one group.",
            json!({"data_source": data_source("The table to group"), "key_name": group_keys(keys)}),
            &["data_source", "key_name"],
            "The grouped table.",
        ),
        spec(
            "transform_data",
            "Replace a column by a transformation of its values (or write it to `output_key_name`), with SQLite's semantics (null in, null out): `substring` with {start_index, end_index} (0-based, end exclusive; a negative start_index counts from the end), `abs`, `datetime` with {pattern: \"%Y\"|\"%m\"|\"%d\"}, `arithmetic` with {operator: \"add\"|\"subtract\"|\"multiply\"|\"divide\"|\"concat\", other_key_name | value} (the row's value <operator> the same row's `other_key_name` value or `value`; integer by integer divides as integers, by zero gives null; text is read as a number), `cast` with {type: \"integer\"|\"real\"|\"numeric\"|\"text\"}, `round` with {digits} (half away from zero), `length`, `upper`, `lower`, `instr` with {substring} (1-based position, 0 when absent), `replace` with {pattern, replacement}, `trim` with {characters, side: \"both\"|\"left\"|\"right\"}, `julianday`, `strftime` with {format} (SQLite's %d %f %H %j %J %m %M %s %S %w %W %Y); or write the column `key_name` (new or replaced) with SQL's CASE: `case` with {when: [{conditions: [[condition, …], …], then}], else}, where each condition is a `filter_data` condition object {key_name, condition, value | other_key_name}, the inner lists are AND-ed and the outer ones OR-ed, and `then`/`else` are {value} or {key_name} (a missing `else` is null).",
            json!({
                "data_source": data_source("The table to transform"),
                "key_name": key_name(keys, false),
                "operation_type": {"type": "string", "enum": TRANSFORMS, "description": "The transformation."},
                "operation_args": {"type": "object", "description": "Arguments of the transformation."},
                "output_key_name": {"type": "string", "description": "The column the result is written to (added when new) instead of replacing `key_name`."},
            }),
            &["data_source", "key_name", "operation_type"],
            "The transformed table.",
        ),
        spec(
            "select_unique_values",
            "Return the distinct values of a list, or the distinct rows of several row-aligned lists (a list of their `$LABEL$`s), first occurrences in order; `offset` skips the first ones, `limit` keeps the first of the rest.",
            json!({
                "unique_array": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}], "description": "The list as its `$LABEL$`, or several row-aligned lists as a list of `$LABEL$`s (distinct rows)."},
                "limit": limit,
                "offset": offset,
            }),
            &["unique_array"],
            "The distinct values.",
        ),
        spec(
            "concatenate_data",
            "Append the rows of the second table to the rows of the first (same columns; duplicates kept).",
            json!({"data_source_1": data_source("The first table"), "data_source_2": data_source("The second table")}),
            &["data_source_1", "data_source_2"],
            "The concatenated table.",
        ),
        spec(
            "combine_data",
            "Combine two tables (or two sets of lists, each a row-aligned list of `$LABEL$`s) row-wise like SQL set operations: `union` (distinct rows of both), `union_all` (all rows of both), `intersect` (distinct rows of the first also in the second), `except` (distinct rows of the first not in the second), or `either` (the rows of two filters of one table, each row once: an OR).",
            json!({
                "data_source_1": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}], "description": "The first table as its `$LABEL$`, or its columns as a list of `$LABEL$`s of lists."},
                "data_source_2": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}], "description": "The second table or columns, in the same form."},
                "operation": {"type": "string", "enum": COMBINE_OPERATIONS, "description": "How to combine the rows."},
            }),
            &["data_source_1", "data_source_2", "operation"],
            "The combined table.",
        ),
        spec(
            "calculate",
            "Arithmetic between two numbers, single values or lists (elementwise), with SQLite's rules: `divide` of an integer by an integer truncates toward zero, division by zero gives null; `round` rounds operand_a to operand_b decimals, half away from zero.",
            json!({
                "operand_a": {"anyOf": [{"type": "string"}, {"type": "number"}], "description": "A number or the `$LABEL$` of an earlier value or list."},
                "operand_b": {"anyOf": [{"type": "string"}, {"type": "number"}], "description": "A number or the `$LABEL$` of an earlier value or list."},
                "operator": {"type": "string", "enum": OPERATORS, "description": "The operation: operand_a <operator> operand_b."},
            }),
            &["operand_a", "operand_b", "operator"],
            "The result.",
        ),
    ]
}

#[cfg(test)]
mod common_subset_tests {
    /// Whether `schema` (or any schema nested in it) has a `type` that is not a single string.
    fn has_type_array(schema: &serde_json::Value) -> bool {
        match schema {
            serde_json::Value::Object(m) => {
                m.get("type").is_some_and(|t| !t.is_string()) || m.values().any(has_type_array)
            }
            serde_json::Value::Array(a) => a.iter().any(has_type_array),
            _ => false,
        }
    }

    /// Issue 29: `"type": ["string", "number", "integer", "null"]` sent Hermes and Granite chat
    /// templates into a `RecursionError` on every SLOT row; no tool of the pool has a type array.
    #[test]
    fn no_tool_schema_has_a_type_array() {
        let keys = vec![super::KeyDescription {
            key_name: "t_a".into(),
            description: "a".into(),
            dtype: "integer".into(),
        }];
        for spec in super::slot_tools(None)
            .into_iter()
            .chain(super::slot_tools(Some(&keys)))
        {
            assert!(!has_type_array(&spec.parameters), "{}: {}", spec.name, spec.parameters);
        }
        for spec in crate::tools::sel::sel_tools(None)
            .into_iter()
            .chain(crate::tools::sel::sel_tools(Some(&keys)))
        {
            assert!(!has_type_array(&spec.parameters), "{}: {}", spec.name, spec.parameters);
        }
    }
}
