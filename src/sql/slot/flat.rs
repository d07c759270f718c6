//! The not-grouped tail of a SELECT: `sort_data` per ORDER BY key (an arithmetic key as a
//! `calculate` list sorted on with `by_values`), then per SELECT item
//! `retrieve_data`, `aggregate_data` or `calculate`; DISTINCT over several items as
//! `select_unique_values` of the row-aligned columns.

use serde_json::{Value as Json, json};

use super::{Emitter, aggregate_args};
use crate::sql::plan::{Agg, Condition, Measure, QueryPlan};
use crate::sql::{LowerError, unsupported};
use crate::tools::label_ref;

pub(super) fn limit(plan: &QueryPlan) -> i64 {
    plan.limit.unwrap_or(-1)
}

/// `args` of a call applying the plan's LIMIT, with the plan's OFFSET beside it (`"offset": m`,
/// the values skipped before the limit) when the query has one.
pub(super) fn with_offset(plan: &QueryPlan, mut args: Json) -> Json {
    if let Some(m) = plan.offset {
        args["offset"] = json!(m);
    }
    args
}

pub(super) fn lower_flat(em: &mut Emitter, plan: &QueryPlan, mut cur: String) -> Result<(), LowerError> {
    if plan.projection.iter().any(Measure::has_aggregate) {
        // One row: ORDER BY is moot, LIMIT ≥ 1 keeps it.
        if plan.limit == Some(0) {
            return Err(unsupported("limit", "LIMIT 0"));
        }
        if plan.offset.is_some() {
            return Err(unsupported("offset", "OFFSET past the single row of an aggregate"));
        }
        // One row: DISTINCT is moot. A bare column beside MIN/MAX (SQLite's bare-column rule)
        // is read from the row holding the extreme: the first row once sorted.
        let extreme = plan.bare_extreme().map(|_| extreme_first(em, plan, cur.clone()));
        for (i, m) in plan.projection.iter().enumerate() {
            match (m, &extreme) {
                (Measure::Column(k), Some(sorted)) => {
                    let label = em.label(&format!("SELECT_COL_{i}"));
                    em.call(
                        "retrieve_data",
                        json!({"data_source": label_ref(sorted), "key_name": k, "distinct": false, "limit": 1}),
                        label,
                    );
                }
                _ => {
                    scalar(em, &cur, m, true)?;
                }
            }
        }
        return Ok(());
    }
    for key in plan.order_by.iter().rev() {
        let arguments = match &key.measure {
            Measure::Column(k) => json!({"data_source": label_ref(&cur), "key_name": k, "ascending": key.ascending}),
            // `ORDER BY a - b`: the row-aligned list of the expression, then a sort on it.
            m @ Measure::Arith(..) if !m.has_aggregate() => {
                let values = column_arith(em, &cur, m, -1, None)?;
                json!({"data_source": label_ref(&cur), "by_values": values, "ascending": key.ascending})
            }
            m => return Err(unsupported("order_by_expression", m.to_string())),
        };
        let label = em.label("SORTED_DF");
        cur = em.call("sort_data", arguments, label);
    }
    // DISTINCT over several items: the columns, then their distinct rows (LIMIT applies to
    // those). Ordered by a column it does not select, SQLite orders each distinct row by one of
    // its rows' values (the first in scan order): not reproducible by sorting first.
    let rows_distinct = plan.distinct && plan.projection.len() > 1;
    if rows_distinct && plan.order_by.iter().any(|o| !plan.projection.contains(&o.measure)) {
        return Err(unsupported(
            "distinct_order_by_unselected",
            "SELECT DISTINCT with several items, ordered by a column it does not select",
        ));
    }
    let column_limit = if rows_distinct { -1 } else { limit(plan) };
    let mut columns = Vec::new();
    for (i, m) in plan.projection.iter().enumerate() {
        match m {
            Measure::Column(k) => {
                let label = em.label(&format!("SELECT_COL_{i}"));
                let args = json!({"data_source": label_ref(&cur), "key_name": k, "distinct": plan.distinct && !rows_distinct, "limit": column_limit});
                let args = if rows_distinct { args } else { with_offset(plan, args) };
                columns.push(em.call("retrieve_data", args, label));
            }
            Measure::Arith(..) if !plan.distinct => {
                column_arith(em, &cur, m, limit(plan), plan.offset)?;
            }
            _ => return Err(unsupported("select_expression", m.to_string())),
        }
    }
    if rows_distinct {
        let refs: Vec<String> = columns.iter().map(|l| label_ref(l)).collect();
        let label = em.label("UNIQUE_ROWS");
        let mut args = json!({"unique_array": refs});
        if let Some(n) = plan.limit {
            args["limit"] = json!(n);
        }
        em.call("select_unique_values", with_offset(plan, args), label);
    }
    Ok(())
}

/// SQLite's bare-column rule ([`QueryPlan::bare_extreme`]): the rows sorted so that (each
/// group's) first row holds the extreme — descending for MAX (NULLs last); for MIN the NULL cells
/// filtered out (`IS NOT NULL`), then ascending. Returns the sorted table's label, or `cur`
/// when the rule does not apply.
pub(super) fn extreme_first(em: &mut Emitter, plan: &QueryPlan, cur: String) -> String {
    let Some((agg, key)) = plan.bare_extreme() else {
        return cur;
    };
    let mut cur = cur;
    if agg == Agg::Min {
        let not_null = Condition {
            key: key.into(),
            condition: "not_equal_to",
            value: Json::Null,
            other_key: None,
        };
        cur = em.filter(&cur, &not_null);
    }
    let label = em.label("SORTED_DF");
    em.call(
        "sort_data",
        json!({"data_source": label_ref(&cur), "key_name": key, "ascending": agg == Agg::Min}),
        label,
    )
}

/// Emits calls computing a single value; returns the operand (label reference or number).
fn scalar(em: &mut Emitter, source: &str, m: &Measure, top: bool) -> Result<Json, LowerError> {
    match m {
        Measure::Literal(v) if !top => Ok(v.clone()),
        // A scalar subquery's value: its chain's output, emitted before this SELECT.
        Measure::Value(p) if !top => em
            .placeholders
            .get(p)
            .map(|l| json!(l))
            .ok_or_else(|| unsupported("subquery_in_select", p)),
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
            Ok(calculate(em, x, y, op))
        }
        other => Err(unsupported("select_expression", other.to_string())),
    }
}

/// Emits calls computing a list from column arithmetic (`SELECT a - b`).
fn column_arith(
    em: &mut Emitter,
    source: &str,
    m: &Measure,
    limit: i64,
    offset: Option<i64>,
) -> Result<Json, LowerError> {
    match m {
        Measure::Literal(v) => Ok(v.clone()),
        Measure::Column(k) => {
            let label = em.label("RETRIEVED");
            let mut args = json!({"data_source": label_ref(source), "key_name": k, "distinct": false, "limit": limit});
            if let Some(m) = offset {
                args["offset"] = json!(m);
            }
            em.call("retrieve_data", args, label.clone());
            Ok(json!(label_ref(&label)))
        }
        Measure::Arith(a, op, b) => {
            let x = column_arith(em, source, a, limit, offset)?;
            let y = column_arith(em, source, b, limit, offset)?;
            Ok(calculate(em, x, y, op))
        }
        other => Err(unsupported("select_expression", other.to_string())),
    }
}

/// Emits `calculate(x op y)` (numbers or `$LABEL$` references); returns its label reference.
fn calculate(em: &mut Emitter, x: Json, y: Json, op: &impl serde::Serialize) -> Json {
    let label = em.label("CALCULATED");
    em.call(
        "calculate",
        json!({"operand_a": x, "operand_b": y, "operator": op}),
        label.clone(),
    );
    json!(label_ref(&label))
}
