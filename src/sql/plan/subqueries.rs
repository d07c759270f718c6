//! Subqueries and set operations: compound SELECTs (`UNION [ALL]`, `INTERSECT`, `EXCEPT`), and
//! uncorrelated scalar / `[NOT] IN` subqueries planned as earlier chains referenced by
//! placeholder. An operand or subquery may read other tables than the outer query: the lowering
//! gives each further joined table its own setup step ([`crate::sql::slot::Lowered`]).

use serde_json::{Value as Json, json};
use sqlparser::ast::{GroupByExpr, Query, Select, SelectItem, SetExpr, TableFactor};

use super::*;
use crate::sql::schema::Schema;
use crate::sql::{LowerError, unsupported};

/// The SELECTs of a compound query in SQLite's evaluation order (left to right, one
/// precedence), with the operation joining each to the ones before; `None` for a tree that is
/// not left-deep (parenthesised or precedence-regrouped operands).
pub(super) fn compound<'q>(body: &'q SetExpr, out: &mut Vec<(&'static str, &'q Select)>) -> Option<()> {
    match body {
        SetExpr::Select(s) => {
            out.push(("", s));
            Some(())
        }
        SetExpr::SetOperation {
            op,
            set_quantifier,
            left,
            right,
        } => {
            compound(left, out)?;
            let SetExpr::Select(r) = &**right else { return None };
            let all = matches!(set_quantifier, sqlparser::ast::SetQuantifier::All);
            let name = match (op, all) {
                (sqlparser::ast::SetOperator::Union, true) => "union_all",
                (sqlparser::ast::SetOperator::Union, false) => "union",
                (sqlparser::ast::SetOperator::Intersect, false) => "intersect",
                (sqlparser::ast::SetOperator::Except, false) => "except",
                _ => return None,
            };
            out.push((name, r));
            Some(())
        }
        _ => None,
    }
}

/// `SELECT COUNT(*) FROM (<compound SELECT>) [AS t]` and nothing else: the compound's plan with
/// [`QueryPlan::count_rows`] set (its rows, counted). Other derived tables keep the reason
/// `derived_table`.
fn derived_count(q: &Query, select: &Select, schema: &Schema) -> Result<Option<QueryPlan>, LowerError> {
    let [item] = select.from.as_slice() else {
        return Ok(None);
    };
    let TableFactor::Derived { subquery, .. } = &item.relation else {
        return Ok(None);
    };
    let count_star = match select.projection.as_slice() {
        [SelectItem::UnnamedExpr(Expr::Function(f))] => {
            ident_name(&f.name).eq_ignore_ascii_case("count")
                && f.filter.is_none()
                && f.over.is_none()
                && matches!(&f.args, FunctionArguments::List(l)
                    if l.duplicate_treatment.is_none()
                        && matches!(l.args.as_slice(), [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)]))
        }
        _ => false,
    };
    let plain = item.joins.is_empty()
        && select.selection.is_none()
        && matches!(&select.group_by, GroupByExpr::Expressions(e, _) if e.is_empty())
        && select.having.is_none()
        && select.distinct.is_none()
        && q.order_by.is_none()
        && q.limit_clause.is_none();
    if !(count_star && plain && matches!(*subquery.body, SetExpr::SetOperation { .. })) {
        return Ok(None);
    }
    let mut plan = build_query(subquery, schema)?;
    plan.count_rows = true;
    Ok(Some(plan))
}

/// Builds the plan of one query (top level or a subquery).
pub(super) fn build_query(q: &Query, schema: &Schema) -> Result<QueryPlan, LowerError> {
    if q.with.is_some() {
        return Err(unsupported("cte", "WITH"));
    }
    if let SetExpr::Select(select) = &*q.body {
        if let Some(plan) = derived_count(q, select, schema)? {
            return Ok(plan);
        }
        if let Some((grouped, specs)) = super::over_groups::over_groups(q, select) {
            return super::over_groups::plan(&grouped, &specs, schema);
        }
        if let Some(flat) = super::derived::flatten(q, select, schema) {
            return build_query(&flat, schema);
        }
        return Builder::new(schema, select)?.build(Some(q), select);
    }
    let mut parts = Vec::new();
    if compound(&q.body, &mut parts).is_none() {
        return Err(unsupported("set_operation", &q.body));
    }
    if q.order_by.is_some() || q.limit_clause.is_some() {
        return Err(unsupported(
            "set_operation_order_by",
            "ORDER BY/LIMIT over a compound SELECT",
        ));
    }
    let mut first = Builder::new(schema, parts[0].1)?.build(None, parts[0].1)?;
    for (op, select) in &parts[1..] {
        let side = Builder::new(schema, select)?.build(None, select)?;
        if side.projection.len() != first.projection.len() {
            return Err(LowerError::Schema(format!(
                "{op} of SELECTs with different column counts"
            )));
        }
        first.set_ops.push((op, side));
    }
    Ok(first)
}

impl<'s> Builder<'s> {
    /// Plans an uncorrelated subquery (over this query's joined table or any other) and returns
    /// the placeholder `$SUBQUERY_<i>$` its value is referred to by. A subquery naming a column
    /// of the outer query is `correlated_subquery`.
    pub(super) fn subquery(&mut self, q: &Query, e: &Expr) -> Result<Json, LowerError> {
        let plan = build_query(q, self.schema).map_err(|err| match err {
            LowerError::Schema(_) => unsupported("correlated_subquery", e),
            other => other,
        })?;
        // A set operation gives a list for `[NOT] IN`, never a single value.
        let list = matches!(e, Expr::InSubquery { .. });
        let width = match plan.over_groups.len() {
            0 => plan.projection.len(),
            n => n,
        };
        if width != 1 || (!plan.set_ops.is_empty() && !list) {
            return Err(unsupported("subquery_shape", e));
        }
        self.subqueries.push(plan);
        Ok(json!(format!("$SUBQUERY_{}$", self.subqueries.len() - 1)))
    }
}
