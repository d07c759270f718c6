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

use std::collections::HashMap;

use serde_json::{Value as Json, json};

use super::plan::{Condition, Measure, QueryPlan};
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

    fn label(&mut self, base: &str) -> String {
        let n = self.used.entry(base.to_string()).or_insert(0);
        let label = if *n == 0 {
            base.to_string()
        } else {
            format!("{base}_{n}")
        };
        *n += 1;
        label
    }

    fn call(&mut self, name: &str, args: Json, label: String) -> String {
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

    fn filter(&mut self, source: &str, c: &Condition) -> String {
        let label = format!("FILTERED_DF_{}", self.counter);
        self.counter += 1;
        let value = match c.value.as_str().and_then(|v| self.placeholders.get(v)) {
            Some(l) => json!(l),
            None => c.value.clone(),
        };
        self.call(
            "filter_data",
            json!({"data_source": label_ref(source), "key_name": c.key, "value": value, "condition": c.condition}),
            label,
        )
    }
}

/// `aggregate_data` arguments; `key_name` is left out for a row count (`COUNT(*)`), so the call
/// validates against the instance's `key_name` enum.
fn aggregate_args(source: &str, agg: &str, key: Option<&str>, distinct: bool) -> Json {
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
    em.start(plan);
    let mut sinks = segment(&mut em, |em| lower_select(em, plan))?;
    for (op, side) in &plan.set_ops {
        let right = segment(&mut em, |em| lower_select(em, side))?;
        let source = |labels: &[String]| match labels {
            [one] if one.starts_with("COMBINED_DF") => json!(label_ref(one)),
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
    let mut setups = em.setups.into_iter().map(|(_, c)| c);
    let setup = setups.next().expect("the outer query's join step");
    Ok(Lowered {
        setup,
        additional_setup: setups.collect(),
        calls: em.calls,
    })
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
        let outs = segment(em, |em| lower_select(em, sub))?;
        let [out] = outs.as_slice() else {
            return Err(unsupported("subquery_shape", "a subquery with several outputs"));
        };
        let name = em.label(&format!("SUBQUERY_{i}"));
        let call = em.calls.iter_mut().rev().find(|c| &c.label == out).expect("emitted");
        call.label = name.clone();
        placeholders.insert(format!("$SUBQUERY_{i}$"), label_ref(&name));
    }
    let outer = std::mem::replace(&mut em.placeholders, placeholders);
    let start = em.start(plan);
    let done = lower_body(em, plan, &start);
    em.placeholders = outer;
    done
}

fn lower_body(em: &mut Emitter, plan: &QueryPlan, start: &str) -> Result<(), LowerError> {
    let mut cur = start.to_string();
    for t in &plan.transforms {
        let label = format!("TRANSFORMED_DF_{}", em.counter);
        em.counter += 1;
        cur = em.call(
            "transform_data",
            json!({"data_source": label_ref(&cur), "key_name": t.key, "operation_type": t.operation, "operation_args": t.args}),
            label,
        );
    }
    for c in &plan.filters {
        cur = em.filter(&cur, c);
    }
    if !plan.branches.is_empty() {
        let base = cur.clone();
        let mut outs = Vec::new();
        for branch in &plan.branches {
            let mut b = base.clone();
            for c in branch {
                b = em.filter(&b, c);
            }
            outs.push(b);
        }
        cur = outs[0].clone();
        for other in &outs[1..] {
            let label = em.label("COMBINED_DF");
            cur = em.call(
                "combine_data",
                json!({"data_source_1": label_ref(&cur), "data_source_2": label_ref(other), "operation": "either"}),
                label,
            );
        }
    }
    match &plan.group_by {
        Some(key) => lower_grouped(em, plan, cur, key),
        None => lower_flat(em, plan, cur),
    }
}

fn limit(plan: &QueryPlan) -> i64 {
    plan.limit.unwrap_or(-1)
}

fn lower_flat(em: &mut Emitter, plan: &QueryPlan, mut cur: String) -> Result<(), LowerError> {
    if plan.projection.iter().any(Measure::has_aggregate) {
        // One row: ORDER BY is moot, LIMIT ≥ 1 keeps it.
        if plan.limit == Some(0) {
            return Err(unsupported("limit", "LIMIT 0"));
        }
        // One row: DISTINCT is moot.
        for m in &plan.projection {
            scalar(em, &cur, m, true)?;
        }
        return Ok(());
    }
    for key in plan.order_by.iter().rev() {
        let Measure::Column(k) = &key.measure else {
            return Err(unsupported("order_by_expression", key.measure.to_string()));
        };
        let label = em.label("SORTED_DF");
        cur = em.call(
            "sort_data",
            json!({"data_source": label_ref(&cur), "key_name": k, "ascending": key.ascending}),
            label,
        );
    }
    // DISTINCT over several items: the columns, then their distinct rows.
    let rows_distinct = plan.distinct && plan.projection.len() > 1;
    if rows_distinct && plan.limit.is_some() {
        return Err(unsupported(
            "distinct_multi_column",
            "SELECT DISTINCT with several items and LIMIT",
        ));
    }
    let mut columns = Vec::new();
    for (i, m) in plan.projection.iter().enumerate() {
        match m {
            Measure::Column(k) => {
                let label = em.label(&format!("SELECT_COL_{i}"));
                columns.push(em.call(
                    "retrieve_data",
                    json!({"data_source": label_ref(&cur), "key_name": k, "distinct": plan.distinct && !rows_distinct, "limit": limit(plan)}),
                    label,
                ));
            }
            Measure::Arith(..) if !plan.distinct => {
                column_arith(em, &cur, m, limit(plan))?;
            }
            _ => return Err(unsupported("select_expression", m.to_string())),
        }
    }
    if rows_distinct {
        let refs: Vec<String> = columns.iter().map(|l| label_ref(l)).collect();
        let label = em.label("UNIQUE_ROWS");
        em.call("select_unique_values", json!({"unique_array": refs}), label);
    }
    Ok(())
}

/// Emits calls computing a single value; returns the operand (label reference or number).
fn scalar(em: &mut Emitter, source: &str, m: &Measure, top: bool) -> Result<Json, LowerError> {
    match m {
        Measure::Literal(v) if !top => Ok(v.clone()),
        Measure::Aggregate {
            agg,
            key,
            distinct,
            filters,
        } => {
            let mut src = source.to_string();
            for c in filters {
                src = em.filter(&src, c);
            }
            let label = em.label(&agg.name().to_uppercase());
            em.call(
                "aggregate_data",
                aggregate_args(&src, agg.name(), key.as_deref(), *distinct),
                label.clone(),
            );
            Ok(json!(label_ref(&label)))
        }
        Measure::Arith(a, op, b) => {
            let x = scalar(em, source, a, false)?;
            let y = scalar(em, source, b, false)?;
            let label = em.label("CALCULATED");
            em.call(
                "calculate",
                json!({"operand_a": x, "operand_b": y, "operator": op}),
                label.clone(),
            );
            Ok(json!(label_ref(&label)))
        }
        other => Err(unsupported("select_expression", other.to_string())),
    }
}

/// Emits calls computing a list from column arithmetic (`SELECT a - b`).
fn column_arith(em: &mut Emitter, source: &str, m: &Measure, limit: i64) -> Result<Json, LowerError> {
    match m {
        Measure::Literal(v) => Ok(v.clone()),
        Measure::Column(k) => {
            let label = em.label("RETRIEVED");
            em.call(
                "retrieve_data",
                json!({"data_source": label_ref(source), "key_name": k, "distinct": false, "limit": limit}),
                label.clone(),
            );
            Ok(json!(label_ref(&label)))
        }
        Measure::Arith(a, op, b) => {
            let x = column_arith(em, source, a, limit)?;
            let y = column_arith(em, source, b, limit)?;
            let label = em.label("CALCULATED");
            em.call(
                "calculate",
                json!({"operand_a": x, "operand_b": y, "operator": op}),
                label.clone(),
            );
            Ok(json!(label_ref(&label)))
        }
        other => Err(unsupported("select_expression", other.to_string())),
    }
}

fn lower_grouped(em: &mut Emitter, plan: &QueryPlan, cur: String, key: &str) -> Result<(), LowerError> {
    let label = em.label("GROUPED");
    let grouped = em.call(
        "group_data_by",
        json!({"data_source": label_ref(&cur), "key_name": key}),
        label,
    );
    // The distinct aggregates the query uses, in first-use order.
    let mut aggs: Vec<&Measure> = Vec::new();
    let all = plan
        .projection
        .iter()
        .chain(plan.having.iter().map(|h| &h.measure))
        .chain(plan.order_by.iter().map(|o| &o.measure));
    for m in all {
        match m {
            Measure::Aggregate { filters, .. } if !filters.is_empty() => {
                return Err(unsupported("case", "conditional aggregate with GROUP BY"));
            }
            Measure::Aggregate { .. } if !aggs.contains(&m) => aggs.push(m),
            Measure::Arith(..) => return Err(unsupported("group_arithmetic", m.to_string())),
            _ => {}
        }
    }
    let reshapes = !plan.having.is_empty() || !plan.order_by.is_empty() || plan.limit.is_some();
    if plan.distinct {
        return Err(unsupported("distinct_group_by", "SELECT DISTINCT with GROUP BY"));
    }
    if aggs.len() > 1 && (!plan.order_by.is_empty() || plan.limit.is_some()) {
        return Err(unsupported(
            "group_multiple_aggregates",
            "ORDER BY/LIMIT over several aggregates",
        ));
    }
    let emit_agg = |em: &mut Emitter, m: &Measure| -> String {
        let Measure::Aggregate { agg, key, distinct, .. } = m else {
            unreachable!("aggregates only")
        };
        let label = em.label(&agg.name().to_uppercase());
        em.call(
            "aggregate_data",
            aggregate_args(&grouped, agg.name(), key.as_deref(), *distinct),
            label,
        )
    };
    if aggs.is_empty() {
        // `SELECT k FROM t GROUP BY k [ORDER BY k]`: one value per group.
        if reshapes {
            return Err(unsupported(
                "group_order_without_aggregate",
                "ORDER BY/LIMIT over groups without an aggregate",
            ));
        }
        for (i, m) in plan.projection.iter().enumerate() {
            let Measure::Column(k) = m else {
                unreachable!("no aggregates")
            };
            let label = em.label(&format!("SELECT_COL_{i}"));
            em.call(
                "retrieve_data",
                json!({"data_source": label_ref(&grouped), "key_name": k, "distinct": false, "limit": -1}),
                label,
            );
        }
        return Ok(());
    }
    if aggs.len() == 1 {
        let agg_name = match aggs[0] {
            Measure::Aggregate { agg, .. } => agg.name(),
            _ => unreachable!("aggregates only"),
        };
        let mut table = emit_agg(em, aggs[0]);
        for h in &plan.having {
            table = em.filter(
                &table,
                &Condition {
                    key: agg_name.into(),
                    condition: h.condition,
                    value: h.value.clone(),
                },
            );
        }
        for o in plan.order_by.iter().rev() {
            let k = match &o.measure {
                Measure::Column(k) => k.clone(),
                _ => agg_name.to_string(),
            };
            let label = em.label("SORTED_DF");
            table = em.call(
                "sort_data",
                json!({"data_source": label_ref(&table), "key_name": k, "ascending": o.ascending}),
                label,
            );
        }
        for (i, m) in plan.projection.iter().enumerate() {
            let k = match m {
                Measure::Column(k) => k.clone(),
                _ => agg_name.to_string(),
            };
            let label = em.label(&format!("SELECT_COL_{i}"));
            em.call(
                "retrieve_data",
                json!({"data_source": label_ref(&table), "key_name": k, "distinct": false, "limit": limit(plan)}),
                label,
            );
        }
        return Ok(());
    }
    // Several aggregates: one aggregate table each (one row per group, groups in one order).
    // HAVING filters the tables of the aggregates it compares; the groups that pass every
    // comparison are then kept in the other tables with an `is_in` filter on the group key, so
    // every table keeps the same groups in the same order and the items read from them align.
    let mut tables: Vec<(Measure, String)> = aggs.iter().map(|m| ((*m).clone(), emit_agg(em, m))).collect();
    let mut base = grouped.clone();
    if !plan.having.is_empty() {
        let mut compared: Vec<usize> = Vec::new();
        for h in &plan.having {
            let (i, (m, t)) = tables
                .iter()
                .enumerate()
                .find(|(_, (a, _))| *a == h.measure)
                .expect("collected");
            let Measure::Aggregate { agg, .. } = m else {
                unreachable!("aggregates only")
            };
            let c = Condition {
                key: agg.name().into(),
                condition: h.condition,
                value: h.value.clone(),
            };
            let filtered = em.filter(&t.clone(), &c);
            tables[i].1 = filtered;
            if !compared.contains(&i) {
                compared.push(i);
            }
        }
        let keys_of = |em: &mut Emitter, table: &str| -> String {
            let label = em.label("GROUP_KEYS");
            em.call(
                "retrieve_data",
                json!({"data_source": label_ref(table), "key_name": key, "distinct": false, "limit": -1}),
                label,
            )
        };
        base = tables[compared[0]].1.clone();
        for &i in &compared[1..] {
            let keys = keys_of(em, &tables[i].1);
            base = em.filter(
                &base,
                &Condition {
                    key: key.into(),
                    condition: "is_in",
                    value: json!(label_ref(&keys)),
                },
            );
        }
        let keys = keys_of(em, &base);
        for (i, (m, t)) in tables.iter_mut().enumerate() {
            if i == compared[0] {
                *t = base.clone();
            } else if plan.projection.contains(m) {
                *t = em.filter(
                    t,
                    &Condition {
                        key: key.into(),
                        condition: "is_in",
                        value: json!(label_ref(&keys)),
                    },
                );
            }
        }
    }
    for (i, m) in plan.projection.iter().enumerate() {
        let (source, k) = match m {
            Measure::Column(k) => (base.clone(), k.clone()),
            Measure::Aggregate { agg, .. } => {
                let t = tables
                    .iter()
                    .find(|(a, _)| a == m)
                    .map(|(_, t)| t.clone())
                    .expect("collected");
                (t, agg.name().to_string())
            }
            _ => unreachable!("arithmetic rejected above"),
        };
        let label = em.label(&format!("SELECT_COL_{i}"));
        em.call(
            "retrieve_data",
            json!({"data_source": label_ref(&source), "key_name": k, "distinct": false, "limit": -1}),
            label,
        );
    }
    Ok(())
}
