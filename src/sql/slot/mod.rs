//! Plan → SLOT call sequence (Live API-Bench §3 "SLOT"; labels as the reference builds them).
//!
//! The join step `initialize_active_data` (label `starting_table_var`) is the instance's setup,
//! kept apart in [`Lowered::setup`] in the reference's argument shapes (Live API-Bench Listing
//! 10): the framework runs it, a model never predicts it. A subquery or set-operation operand
//! over another joined table gets a further setup call of the same shape in
//! [`Lowered::additional_setup`] (labels `starting_table_var_2`, `_3`, …, one per distinct
//! joined table, in first-use order). Order of the gold calls: transforms
//! (`TRANSFORMED_DF_i`) and filters (`FILTERED_DF_i`, one counter `i` for both); one disjunction
//! as one filter chain per branch joined by `combine_data(operation="either")` (`COMBINED_DF`:
//! a row matching several branches appears once, as in SQL); then either
//! - grouped: `group_data_by` (`GROUPED`), `aggregate_data` per distinct aggregate (label the
//!   aggregation in upper case, a table with the group's first row plus the aggregate column),
//!   HAVING as `filter_data` on it, ORDER BY as `sort_data`, and `retrieve_data` per SELECT item;
//! - not grouped: `sort_data` per ORDER BY key, least significant first (stable sorts compose to
//!   the lexicographic order, `SORTED_DF`), then per SELECT item `retrieve_data` (`SELECT_COL_i`)
//!   or `aggregate_data` (upper-case aggregation label) or `calculate` (`CALCULATED`).
//!
//! Labels repeated in one sequence get a `_1`, `_2`, … suffix so every label is unique.

mod flat;
mod grouped;

use std::collections::HashMap;

use serde_json::{Value as Json, json};

use self::flat::lower_flat;
use self::grouped::lower_grouped;
use super::plan::{Condition, QueryPlan};
use super::{LowerError, unsupported};
use crate::tools::table::alias_to_table_dict;
use crate::tools::{Call, label_ref, sink_calls};

/// The label of the join step's output, which the first gold call reads.
pub const STARTING_TABLE_VAR: &str = "starting_table_var";

/// The lowered instance: its setup call and its gold calls.
#[derive(Debug, Clone, PartialEq)]
pub struct Lowered {
    /// The join step `initialize_active_data(condition_sequence, alias_to_table_dict,
    /// database_path)` labelled `starting_table_var`: `condition_sequence` is
    /// `[["<alias>.<column>", "<alias>.<column>", "INNER"|"LEFT"], …]`, `alias_to_table_dict`
    /// `{alias: {original_table_name, modified_table_name}}`.
    pub setup: Call,
    /// Further join steps, same shape, labelled `starting_table_var_<n>` (n = 2, 3, …): the
    /// joined tables that subqueries or set-operation operands read besides the outer query's.
    /// Empty for a query over one joined table.
    pub additional_setup: Vec<Call>,
    /// The gold calls a model predicts; they read `$starting_table_var$` (and the additional
    /// setup labels).
    pub calls: Vec<Call>,
}

/// The join step of a plan (see [`Lowered::setup`]).
pub fn setup_call(plan: &QueryPlan, database_path: &str) -> Call {
    setup_call_labelled(plan, database_path, STARTING_TABLE_VAR)
}

fn setup_call_labelled(plan: &QueryPlan, database_path: &str, label: &str) -> Call {
    let conditions: Vec<Json> = plan.joins.iter().map(|c| json!([c.0, c.1, c.2])).collect();
    let aliases = alias_to_table_dict(&plan.tables);
    let Json::Object(arguments) =
        json!({"condition_sequence": conditions, "alias_to_table_dict": aliases, "database_path": database_path})
    else {
        unreachable!("an object")
    };
    Call {
        name: "initialize_active_data".into(),
        arguments,
        label: label.into(),
    }
}

struct Emitter {
    calls: Vec<Call>,
    used: HashMap<String, usize>,
    counter: usize,
    /// `$SUBQUERY_<i>$` placeholders of the SELECT being lowered → its subquery chains' labels.
    placeholders: HashMap<String, String>,
    /// The join steps so far with their plans' join signatures; the first is the outer query's.
    setups: Vec<(Vec<String>, Call)>,
    database_path: String,
}

impl Emitter {
    /// The label of the join step `plan` reads: an earlier one with the same join signature, or
    /// a new setup call `starting_table_var_<n>`.
    fn start(&mut self, plan: &QueryPlan) -> String {
        let signature = plan.join_signature();
        if let Some((_, c)) = self.setups.iter().find(|(s, _)| *s == signature) {
            return c.label.clone();
        }
        let label = match self.setups.len() {
            0 => STARTING_TABLE_VAR.to_string(),
            n => format!("{STARTING_TABLE_VAR}_{}", n + 1),
        };
        self.used.insert(label.clone(), 1);
        let call = setup_call_labelled(plan, &self.database_path, &label);
        self.setups.push((signature, call));
        label
    }

    pub(super) fn label(&mut self, base: &str) -> String {
        let n = self.used.entry(base.to_string()).or_insert(0);
        let label = if *n == 0 {
            base.to_string()
        } else {
            format!("{base}_{n}")
        };
        *n += 1;
        label
    }

    pub(super) fn call(&mut self, name: &str, args: Json, label: String) -> String {
        let Json::Object(arguments) = args else {
            unreachable!("arguments are objects")
        };
        self.calls.push(Call {
            name: name.into(),
            arguments,
            label: label.clone(),
        });
        label
    }

    /// A disjunction over `source`: one filter chain per branch, joined by
    /// `combine_data(operation="either")` (a row matching several branches appears once).
    pub(super) fn either(&mut self, source: &str, branches: &[Vec<Condition>]) -> String {
        let mut outs = Vec::new();
        for branch in branches {
            let mut b = source.to_string();
            for c in branch {
                b = self.filter(&b, c);
            }
            outs.push(b);
        }
        let mut cur = outs[0].clone();
        for other in &outs[1..] {
            let label = self.label("COMBINED_DF");
            cur = self.call(
                "combine_data",
                json!({"data_source_1": label_ref(&cur), "data_source_2": label_ref(other), "operation": "either"}),
                label,
            );
        }
        cur
    }

    pub(super) fn filter(&mut self, source: &str, c: &Condition) -> String {
        let label = format!("FILTERED_DF_{}", self.counter);
        self.counter += 1;
        let value = match c.value.as_str().and_then(|v| self.placeholders.get(v)) {
            Some(l) => json!(l),
            None => c.value.clone(),
        };
        let arguments = match &c.other_key {
            Some(other) => {
                json!({"data_source": label_ref(source), "key_name": c.key, "other_key_name": other, "condition": c.condition})
            }
            None => {
                json!({"data_source": label_ref(source), "key_name": c.key, "value": value, "condition": c.condition})
            }
        };
        self.call("filter_data", arguments, label)
    }
}

/// `aggregate_data` arguments; `key_name` is left out for a row count (`COUNT(*)`), so the call
/// validates against the instance's `key_name` enum.
pub(super) fn aggregate_args(source: &str, agg: &str, key: Option<&str>, distinct: bool) -> Json {
    let mut args =
        json!({"data_source": label_ref(source), "aggregation_type": agg, "distinct": distinct, "limit": -1});
    if let Some(k) = key {
        args["key_name"] = json!(k);
    }
    args
}

/// Lowers a plan to SLOT calls; `database_path` is the join step's (relative) database path.
pub fn lower(plan: &QueryPlan, database_path: &str) -> Result<Lowered, LowerError> {
    let mut em = Emitter {
        calls: vec![],
        used: HashMap::new(),
        counter: 0,
        placeholders: HashMap::new(),
        setups: vec![],
        database_path: database_path.into(),
    };
    if !plan.tables.is_empty() {
        em.start(plan);
    }
    let sinks = lower_compound(&mut em, plan)?;
    if plan.count_rows {
        // A derived table's rows, counted (`SELECT COUNT(*) FROM (… UNION …)`).
        let [table] = sinks.as_slice() else {
            return Err(unsupported("derived_table", "COUNT(*) over a derived table of lists"));
        };
        let label = em.label("COUNT");
        em.call("aggregate_data", aggregate_args(table, "count", None, false), label);
    }
    let mut setups = em.setups.into_iter().map(|(_, c)| c);
    // The outer query's join step (its first subquery's, for a SELECT without FROM).
    let setup = setups
        .next()
        .ok_or_else(|| unsupported("no_from", "a SELECT that reads no table"))?;
    Ok(Lowered {
        setup,
        additional_setup: setups.collect(),
        calls: em.calls,
    })
}

/// The tools of a SELECT's tail whose output is a table (rather than a list or a value).
const TABLE_TOOLS: [&str; 2] = ["combine_data", "select_unique_values"];

/// Emits a SELECT and the set operations that follow it (`combine_data`, `COMBINED_DF`, applied
/// left to right); returns the labels of its outputs.
fn lower_compound(em: &mut Emitter, plan: &QueryPlan) -> Result<Vec<String>, LowerError> {
    let mut sinks = segment(em, |em| lower_select(em, plan))?;
    for (op, side) in &plan.set_ops {
        let right = segment(em, |em| lower_select(em, side))?;
        // A single output that is a table (a set operation's, DISTINCT rows') is passed as the
        // table; column outputs as the list of their labels.
        let tables: Vec<String> = em
            .calls
            .iter()
            .filter(|c| TABLE_TOOLS.contains(&c.name.as_str()))
            .map(|c| c.label.clone())
            .collect();
        let source = |labels: &[String]| match labels {
            [one] if tables.contains(one) => json!(label_ref(one)),
            many => json!(many.iter().map(|l| label_ref(l)).collect::<Vec<_>>()),
        };
        let label = em.label("COMBINED_DF");
        em.call(
            "combine_data",
            json!({"data_source_1": source(&sinks), "data_source_2": source(&right), "operation": op}),
            label.clone(),
        );
        sinks = vec![label];
    }
    Ok(sinks)
}

/// Runs `emit` and returns the labels of the calls it emitted that no later call it emitted
/// refers to (the segment's outputs), in call order.
fn segment(
    em: &mut Emitter,
    emit: impl FnOnce(&mut Emitter) -> Result<(), LowerError>,
) -> Result<Vec<String>, LowerError> {
    let start = em.calls.len();
    emit(em)?;
    let calls = &em.calls[start..];
    Ok(sink_calls(calls).into_iter().map(|c| c.label.clone()).collect())
}

/// Emits the calls of one SELECT reading its joined table (see [`Emitter::start`]): its
/// subqueries' chains first (each chain's output relabelled `SUBQUERY_<i>`, the placeholder its conditions use),
/// then transforms, filters, the disjunction, and the grouped or flat tail.
fn lower_select(em: &mut Emitter, plan: &QueryPlan) -> Result<(), LowerError> {
    let mut placeholders = HashMap::new();
    for (i, sub) in plan.subqueries.iter().enumerate() {
        let outs = segment(em, |em| lower_compound(em, sub).map(|_| ()))?;
        let [out] = outs.as_slice() else {
            return Err(unsupported("subquery_shape", "a subquery with several outputs"));
        };
        let name = em.label(&format!("SUBQUERY_{i}"));
        let call = em.calls.iter_mut().rev().find(|c| &c.label == out).expect("emitted");
        call.label = name.clone();
        placeholders.insert(format!("$SUBQUERY_{i}$"), label_ref(&name));
    }
    let outer = std::mem::replace(&mut em.placeholders, placeholders);
    // A SELECT without FROM reads only its subqueries' values.
    let start = if plan.tables.is_empty() {
        String::new()
    } else {
        em.start(plan)
    };
    let done = lower_body(em, plan, &start);
    em.placeholders = outer;
    done
}

fn lower_body(em: &mut Emitter, plan: &QueryPlan, start: &str) -> Result<(), LowerError> {
    let mut cur = start.to_string();
    for t in &plan.transforms {
        let label = format!("TRANSFORMED_DF_{}", em.counter);
        em.counter += 1;
        let mut args = json!({"data_source": label_ref(&cur), "key_name": t.key, "operation_type": t.operation, "operation_args": t.args});
        if t.output != t.key {
            args["output_key_name"] = json!(t.output);
        }
        cur = em.call("transform_data", args, label);
    }
    for c in &plan.filters {
        cur = em.filter(&cur, c);
    }
    if !plan.branches.is_empty() {
        cur = em.either(&cur, &plan.branches);
    }
    match plan.group_by.as_slice() {
        [] if !plan.over_groups.is_empty() => Err(unsupported("derived_table", "aggregates over ungrouped rows")),
        [] => lower_flat(em, plan, cur),
        keys => lower_grouped(em, plan, cur, keys),
    }
}
