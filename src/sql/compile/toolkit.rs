//! The SLOT/SEL toolkit of one question: the joined table's key descriptions
//! ([`key_descriptions`]) and the tool specs built from them, shared by the questions of one
//! database over the same join ([`toolkit`]); the SEL catalog and tools-per-query numbers of a
//! build ([`sel_summary`]).

use serde_json::json;

use crate::corpus::Descriptions;
use crate::dataset::{Build, Example};
use crate::recipe::ToolPool;
use crate::sql::{self, schema::Schema};
use crate::tools::Toolkit;
use crate::tools::pool::{KeyDescription, slot_tools};
use crate::tools::reference;
use crate::tools::sel::sel_tools;
use crate::tools::table::safe_name;

/// The toolkits built so far for one database, by the joined table's key descriptions: the
/// questions over the same join share one (building the SLOT/SEL specs was a tenth of a cold
/// build's CPU, issue 17).
pub(super) type Toolkits = std::sync::Mutex<Vec<(Vec<KeyDescription>, Toolkit)>>;

/// The SLOT (`sel` false) or SEL toolkit for `keys`, from `memo` when an earlier question of the
/// database had the same keys.
pub(super) fn toolkit(memo: &Toolkits, keys: &[KeyDescription], sel: bool) -> Toolkit {
    if let Some((_, tools)) = memo.lock().expect("toolkit memo").iter().find(|(k, _)| k == keys) {
        return tools.clone();
    }
    let tools = Toolkit::from(if sel {
        sel_tools(Some(keys))
    } else {
        slot_tools(Some(keys))
    });
    memo.lock().expect("toolkit memo").push((keys.to_vec(), tools.clone()));
    tools
}

/// The columns of the joined tables the plan reads (the outer query's, then those of its
/// subqueries and set-operation operands), in join order, with descriptions and types; a key
/// name is listed once.
pub(super) fn key_descriptions(
    plan: &sql::plan::QueryPlan,
    schema: &Schema,
    descriptions: &Descriptions,
) -> Vec<KeyDescription> {
    let mut out: Vec<KeyDescription> = Vec::new();
    let mut plans = vec![plan];
    let mut i = 0;
    while i < plans.len() {
        let p = plans[i];
        plans.extend(p.subqueries.iter().chain(p.set_ops.iter().map(|(_, s)| s)));
        i += 1;
    }
    for t in plans.iter().flat_map(|p| &p.tables) {
        let Some((table, cols)) = schema.table(&t.table) else {
            continue;
        };
        for c in cols {
            let key_name = safe_name(&t.prefix, c);
            if out.iter().any(|k| k.key_name.eq_ignore_ascii_case(&key_name)) {
                continue;
            }
            let description = descriptions
                .get(&table.to_lowercase())
                .and_then(|d| d.get(&c.to_lowercase()))
                .filter(|d| !d.is_empty())
                .cloned()
                .unwrap_or_else(|| format!("{c} of {table}"));
            out.push(KeyDescription {
                key_name,
                description,
                dtype: schema.dtype(table, c).into(),
            });
        }
    }
    // The columns `transform_data` writes (`output_key_name`, a `case` column) are keys later
    // calls read.
    for t in plans.iter().flat_map(|p| &p.transforms) {
        if out.iter().any(|k| k.key_name.eq_ignore_ascii_case(&t.output)) {
            continue;
        }
        let description = match t.operation {
            "case" => "A row-wise CASE value written by `transform_data`".to_string(),
            op => format!("`{op}` of `{}`, written by `transform_data`", t.key),
        };
        out.push(KeyDescription {
            key_name: t.output.clone(),
            description,
            dtype: transform_dtype(t).into(),
        });
    }
    out
}

/// The OpenAPI type of the column a transform writes.
fn transform_dtype(t: &sql::plan::Transform) -> &'static str {
    match t.operation {
        "arithmetic" if t.args["operator"] == "concat" => "string",
        "arithmetic" | "round" | "julianday" | "abs" => "number",
        "length" | "instr" => "integer",
        "cast" => match t.args["type"].as_str() {
            Some("integer") => "integer",
            Some("text") => "string",
            _ => "number",
        },
        "case" => {
            let values = t.args["when"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|w| &w["then"])
                .chain(t.args.get("else"));
            if values
                .into_iter()
                .all(|v| v.get("value").is_some_and(|v| v.is_number() || v.is_null()))
            {
                "number"
            } else {
                "string"
            }
        }
        _ => "string",
    }
}
/// SEL: dataset catalog and the tools-per-query numbers (the paper: 1256 tools, ~49 per query).
pub(super) fn sel_summary(build: &mut Build) {
    build.catalog = if build.recipe.tool_pool == ToolPool::Reference {
        reference::sel::tools(None)
    } else {
        sel_tools(None)
    };
    let examples: Vec<&Example> = build.groups.values().flat_map(|o| &o.examples).collect();
    let (distinct, total) = tool_counts(&examples);
    build.stats.insert("distinct_tools".into(), json!(distinct));
    build
        .stats
        .insert("tools_per_query".into(), json!(ratio(total, examples.len(), 1)));
}

/// The distinct tools of `examples` (a tool is its database and name) and the tools of all
/// their toolkits together. Reads names only ([`Toolkit::names`]): a merge's toolkits, read from
/// the store, keep their specs unparsed.
pub(super) fn tool_counts(examples: &[&Example]) -> (usize, usize) {
    let mut names = std::collections::HashSet::new();
    let mut total = 0;
    for e in examples {
        let tools = e.tools.names();
        total += tools.len();
        for name in tools {
            names.insert((e.db_id.as_deref().unwrap_or_default(), name));
        }
    }
    (names.len(), total)
}

/// `a / b` rounded to `places` decimals (0 when `b` is 0), for report numbers.
pub(super) fn ratio(a: usize, b: usize, places: i32) -> f64 {
    if b == 0 {
        return 0.0;
    }
    let scale = 10f64.powi(places);
    (a as f64 / b as f64 * scale).round() / scale
}
