//! The grouped tail of a SELECT: `group_data_by`, one `aggregate_data` per distinct aggregate,
//! HAVING as `filter_data` on the aggregate tables, ORDER BY as `sort_data`, `retrieve_data` per
//! SELECT item.

use serde_json::json;

use super::flat::{extreme_first, limit, with_offset};
use super::{Emitter, aggregate_args};
use crate::sql::plan::{Condition, Measure, QueryPlan};
use crate::sql::{LowerError, unsupported};
use crate::tools::label_ref;

/// `keys`: the GROUP BY columns (one or several; `key_name` is a string for one, a list for
/// several — one group per distinct combination).
pub(super) fn lower_grouped(
    em: &mut Emitter,
    plan: &QueryPlan,
    cur: String,
    keys: &[String],
) -> Result<(), LowerError> {
    let key_name = match keys {
        [one] => json!(one),
        several => json!(several),
    };
    let cur = extreme_first(em, plan, cur);
    let label = em.label("GROUPED");
    let grouped = em.call(
        "group_data_by",
        json!({"data_source": label_ref(&cur), "key_name": key_name}),
        label,
    );
    // The distinct aggregates the query uses, in first-use order.
    let mut aggs: Vec<&Measure> = Vec::new();
    let all = plan.measures();
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
    let reshapes = !plan.having.is_empty()
        || !plan.having_branches.is_empty()
        || !plan.order_by.is_empty()
        || plan.limit.is_some();
    if plan.distinct {
        return Err(unsupported("distinct_group_by", "SELECT DISTINCT with GROUP BY"));
    }
    // Several aggregates are sorted by group keys only: each aggregate table is sorted the same
    // way, so the tables stay aligned.
    let by_keys = plan
        .order_by
        .iter()
        .all(|o| matches!(&o.measure, Measure::Column(k) if keys.contains(k)));
    if aggs.len() > 1 && !by_keys {
        return Err(unsupported(
            "group_multiple_aggregates",
            "ORDER BY an aggregate or a non-key column next to several aggregates",
        ));
    }
    if aggs.len() > 1 && plan.limit.is_some() && plan.order_by.is_empty() {
        return Err(unsupported(
            "group_multiple_aggregates",
            "LIMIT without ORDER BY next to several aggregates",
        ));
    }
    if !plan.over_groups.is_empty() && aggs.is_empty() {
        return Err(unsupported(
            "derived_table",
            "aggregates over a derived table of groups without an aggregate (COUNT of the groups)",
        ));
    }
    if !plan.over_groups.is_empty() && aggs.len() > 1 {
        return Err(unsupported(
            "derived_table",
            "aggregates over a derived table grouped with several aggregates",
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
                    other_key: None,
                },
            );
        }
        if !plan.having_branches.is_empty() {
            let on_aggregate = |h: &crate::sql::plan::Having| Condition {
                key: agg_name.into(),
                condition: h.condition,
                value: h.value.clone(),
                other_key: None,
            };
            let branches: Vec<Vec<Condition>> = plan
                .having_branches
                .iter()
                .map(|b| b.iter().map(on_aggregate).collect())
                .collect();
            table = em.either(&table, &branches);
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
        if !plan.over_groups.is_empty() {
            // `SELECT AGG(t.c) FROM (<this>) t`: aggregates of the aggregate table's rows.
            for m in &plan.over_groups {
                let Measure::Aggregate { agg, key, distinct, .. } = m else {
                    return Err(unsupported("derived_table", m.to_string()));
                };
                let label = em.label(&agg.name().to_uppercase());
                em.call(
                    "aggregate_data",
                    aggregate_args(&table, agg.name(), key.as_deref(), *distinct),
                    label,
                );
            }
            return Ok(());
        }
        for (i, m) in plan.projection.iter().enumerate() {
            let k = match m {
                Measure::Column(k) => k.clone(),
                _ => agg_name.to_string(),
            };
            let label = em.label(&format!("SELECT_COL_{i}"));
            em.call(
                "retrieve_data",
                with_offset(
                    plan,
                    json!({"data_source": label_ref(&table), "key_name": k, "distinct": false, "limit": limit(plan)}),
                ),
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
    if !plan.having_branches.is_empty() {
        return Err(unsupported(
            "having_or_multiple_aggregates",
            "HAVING with OR next to several aggregates",
        ));
    }
    let mut base = grouped.clone();
    if !plan.having.is_empty() {
        // Groups are kept aligned by membership of their key; with several keys that would need
        // membership of key tuples, which no filter condition tests.
        let [key] = keys else {
            return Err(unsupported(
                "group_multiple_keys_aggregates",
                "HAVING next to several aggregates with several GROUP BY keys",
            ));
        };
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
                other_key: None,
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
                    other_key: None,
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
                        other_key: None,
                    },
                );
            }
        }
    }
    if !plan.order_by.is_empty() {
        // Sort every table read from by the group keys (stable, the same way in each).
        let sort = |em: &mut Emitter, mut table: String| -> String {
            for o in plan.order_by.iter().rev() {
                let Measure::Column(k) = &o.measure else {
                    unreachable!("checked: group keys only")
                };
                let label = em.label("SORTED_DF");
                table = em.call(
                    "sort_data",
                    json!({"data_source": label_ref(&table), "key_name": k, "ascending": o.ascending}),
                    label,
                );
            }
            table
        };
        // The key columns: of the groups kept by HAVING, or of any aggregate table.
        let keys_from = if base == grouped {
            tables[0].1.clone()
        } else {
            base.clone()
        };
        base = sort(em, keys_from);
        for (m, t) in tables.iter_mut() {
            if plan.projection.contains(m) {
                *t = sort(em, t.clone());
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
            with_offset(
                plan,
                json!({"data_source": label_ref(&source), "key_name": k, "distinct": false, "limit": limit(plan)}),
            ),
            label,
        );
    }
    Ok(())
}
