//! Aggregates over a grouped derived table: `SELECT AGG(t.c), … FROM (<grouped SELECT>) t
//! [WHERE …]` reads the grouped SELECT's rows, which are its groups — the plan of the grouped
//! SELECT with the outer aggregates as [`QueryPlan::over_groups`], lowered as `aggregate_data` on
//! its aggregate table (one row per group).

use sqlparser::ast::{Expr, Query, Select, SelectItem, SetExpr};

use super::derived::{and_all, derived, no_group_by, outputs, substitute};
use super::subqueries::build_query;
use super::*;
use crate::sql::ident::{column_ref, same};
use crate::sql::schema::Schema;
use crate::sql::{LowerError, unsupported};

/// One aggregate of a derived table's rows: (the SQL aggregation, `DISTINCT`, the derived
/// table's item it reads — `None` for `COUNT(*)`).
pub(super) type OverGroups = Vec<(String, bool, Option<usize>)>;

/// `SELECT AGG(t.c), … FROM (<grouped SELECT>) t [WHERE …]`: the grouped SELECT with the outer
/// WHERE added to its HAVING (a filter of its rows, which are its groups) and without its ORDER
/// BY (moot under an aggregate), and the outer aggregates. `None` for any other shape, or when
/// the grouped SELECT has a LIMIT or DISTINCT (its rows are then not its groups).
pub(super) fn over_groups(q: &Query, select: &Select) -> Option<(Query, OverGroups)> {
    let [item] = select.from.as_slice() else { return None };
    let (alias, sub, inner) = derived(&item.relation)?;
    let outer_plain = item.joins.is_empty()
        && no_group_by(select)
        && select.having.is_none()
        && select.distinct.is_none()
        && q.order_by.is_none()
        && q.limit_clause.is_none();
    if !outer_plain || no_group_by(inner) || inner.distinct.is_some() || sub.limit_clause.is_some() {
        return None;
    }
    let alias = alias.map(|a| a.name.value.as_str());
    let items = outputs(inner)?;
    let mut specs = Vec::new();
    for i in &select.projection {
        let (SelectItem::UnnamedExpr(Expr::Function(f))
        | SelectItem::ExprWithAlias {
            expr: Expr::Function(f),
            ..
        }) = i
        else {
            return None;
        };
        let name = crate::sql::ident::object_name(&f.name).to_lowercase();
        if !["count", "sum", "avg", "min", "max"].contains(&name.as_str()) || f.over.is_some() || f.filter.is_some() {
            return None;
        }
        let sqlparser::ast::FunctionArguments::List(list) = &f.args else {
            return None;
        };
        let distinct = matches!(
            list.duplicate_treatment,
            Some(sqlparser::ast::DuplicateTreatment::Distinct)
        );
        let read = match list.args.as_slice() {
            [sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Wildcard)]
                if name == "count" && !distinct =>
            {
                None
            }
            [sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e))] => {
                let (qualifier, col) = column_ref(e)?;
                if qualifier.is_some_and(|q| !alias.is_some_and(|a| same(a, &q.value))) {
                    return None;
                }
                Some(items.iter().position(|(n, _)| same(n, &col.value))?)
            }
            _ => return None,
        };
        specs.push((name, distinct, read));
    }
    let mut grouped = inner.clone();
    if let Some(w) = &select.selection {
        let w = substitute(w, alias, &items, &[])?;
        grouped.having = and_all(inner.having.clone().into_iter().chain([w]));
    }
    let mut out = sub.clone();
    out.order_by = None;
    out.body = Box::new(SetExpr::Select(Box::new(grouped)));
    Some((out, specs))
}

/// The plan of `SELECT AGG(t.c), … FROM (<grouped>) t` ([`over_groups`]): the
/// grouped SELECT's plan with the outer aggregates as [`QueryPlan::over_groups`], each reading a
/// GROUP BY column or the grouped SELECT's aggregate.
pub(super) fn plan(grouped: &Query, specs: &OverGroups, schema: &Schema) -> Result<QueryPlan, LowerError> {
    let mut plan = build_query(grouped, schema)?;
    if plan.group_by.is_empty() || !plan.set_ops.is_empty() || !plan.over_groups.is_empty() {
        return Err(unsupported(
            "derived_table",
            "aggregates over a derived table that is not one grouped SELECT",
        ));
    }
    for (name, distinct, read) in specs {
        let agg = match name.as_str() {
            "count" => Agg::Count,
            "sum" => Agg::Sum,
            "avg" => Agg::Mean,
            "min" => Agg::Min,
            _ => Agg::Max,
        };
        let key = match read.map(|i| &plan.projection[i]) {
            None => None,
            Some(Measure::Column(k)) => Some(k.clone()),
            Some(Measure::Aggregate { agg, filters, .. }) if filters.is_empty() => Some(agg.name().to_string()),
            Some(other) => return Err(unsupported("derived_table", format!("an aggregate of {other}"))),
        };
        plan.over_groups.push(Measure::Aggregate {
            agg,
            key,
            distinct: *distinct,
            filters: vec![],
        });
    }
    Ok(plan)
}
