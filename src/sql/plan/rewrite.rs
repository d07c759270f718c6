//! The normalisation pass (issue 48 D3): rewrites of the parsed query that keep SQLite's
//! meaning exactly and put a construct in a form the planner lowers. Applied to every SELECT at
//! any depth (subqueries, derived tables, compound operands) before planning; the gold answer is
//! always SQLite's answer to the query as written.
//!
//! - `SELECT DISTINCT … GROUP BY k1, …` whose SELECT list holds every group key as an item:
//!   each group is one output row with its own key values, so no two rows are equal and the
//!   DISTINCT is a no-op (dropped). DISTINCT over only some keys can merge rows and stays.
//! - `x [NOT] BETWEEN lo AND hi` with a bound that is not a literal → `(x >= lo AND x <= hi)`
//!   (negated `(x < lo OR x > hi)`): SQLite's definition of BETWEEN, under three-valued logic.
//! - A HAVING conjunct of a grouped query without aggregates or subqueries whose columns are all
//!   GROUP BY keys → a WHERE conjunct: every row of a group holds the group's key, so the groups
//!   it keeps are those of the rows it keeps.

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Distinct, Expr, GroupByExpr, Query, Select, SelectItem, SetExpr, UnaryOperator, VisitMut,
    VisitorMut, visit_expressions,
};

use super::derived::{and_all, conjuncts, has_aggregate};

/// Applies every rewrite of the pass to `q` and the queries nested in it.
pub(super) fn normalise(q: &mut Query) {
    let _ = q.visit(&mut Normaliser);
}

struct Normaliser;

impl VisitorMut for Normaliser {
    type Break = ();

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        selects(&mut q.body);
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        between(e);
        ControlFlow::Continue(())
    }
}

/// The SELECT-level rewrites on each SELECT of a query body (nested queries are visited on
/// their own).
fn selects(body: &mut SetExpr) {
    match body {
        SetExpr::Select(s) => {
            distinct_over_keys(s);
            having_on_keys(s);
        }
        SetExpr::SetOperation { left, right, .. } => {
            selects(left);
            selects(right);
        }
        _ => {}
    }
}

/// The GROUP BY keys of `s`, if it has plain ones.
fn group_keys(s: &Select) -> Option<&[Expr]> {
    match &s.group_by {
        GroupByExpr::Expressions(keys, modifiers) if !keys.is_empty() && modifiers.is_empty() => Some(keys),
        _ => None,
    }
}

/// Case-insensitive rendering, for comparing two expressions as written.
fn text(e: &Expr) -> String {
    e.to_string().to_lowercase()
}

/// The SELECT items' expressions and aliases.
fn items(s: &Select) -> Vec<(&Expr, Option<String>)> {
    s.projection
        .iter()
        .filter_map(|i| match i {
            SelectItem::UnnamedExpr(e) => Some((e, None)),
            SelectItem::ExprWithAlias { expr, alias } => Some((expr, Some(alias.value.to_lowercase()))),
            _ => None,
        })
        .collect()
}

/// Drops a DISTINCT that every group key's presence in the SELECT list makes a no-op.
fn distinct_over_keys(s: &mut Select) {
    if !matches!(s.distinct, Some(Distinct::Distinct)) {
        return;
    }
    let Some(keys) = group_keys(s) else { return };
    let items = items(s);
    let listed = |k: &Expr| match k {
        // `GROUP BY 2`: the second item.
        Expr::Value(v) => matches!(&v.value, sqlparser::ast::Value::Number(n, _)
            if n.parse::<usize>().is_ok_and(|i| i >= 1 && i <= items.len())),
        // `GROUP BY alias`.
        Expr::Identifier(id)
            if items
                .iter()
                .any(|(_, a)| a.as_deref() == Some(id.value.to_lowercase().as_str())) =>
        {
            true
        }
        k => items.iter().any(|(e, _)| text(e) == text(k)),
    };
    if keys.iter().all(listed) {
        s.distinct = None;
    }
}

/// Moves the HAVING conjuncts that only compare group keys into WHERE.
fn having_on_keys(s: &mut Select) {
    let (Some(keys), Some(having)) = (group_keys(s), &s.having) else {
        return;
    };
    let keys: Vec<String> = keys.iter().map(text).collect();
    let aliases: Vec<String> = items(s).into_iter().filter_map(|(_, a)| a).collect();
    let on_keys = |c: &Expr| {
        let mut columns = 0;
        let other = visit_expressions(c, |x| match x {
            Expr::Subquery(_) | Expr::InSubquery { .. } | Expr::Exists { .. } => ControlFlow::Break(()),
            Expr::Identifier(id) if aliases.contains(&id.value.to_lowercase()) => ControlFlow::Break(()),
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                columns += 1;
                if keys.contains(&text(x)) {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                }
            }
            _ => ControlFlow::Continue(()),
        });
        other.is_continue() && columns > 0 && !has_aggregate(c)
    };
    let mut parts = Vec::new();
    conjuncts(having, &mut parts);
    let (moved, kept): (Vec<Expr>, Vec<Expr>) = parts.into_iter().partition(|c| on_keys(c));
    if moved.is_empty() {
        return;
    }
    let wrap = |e: Expr| match e {
        e @ Expr::BinaryOp { .. } => Expr::Nested(Box::new(e)),
        e => e,
    };
    let mut filter: Vec<Expr> = s.selection.take().into_iter().map(wrap).collect();
    filter.extend(moved.into_iter().map(wrap));
    s.selection = and_all(filter);
    s.having = and_all(kept.into_iter().map(wrap));
}

/// A literal (a number, a string, NULL, a negated number), in parentheses or not.
fn is_literal(e: &Expr) -> bool {
    match e {
        Expr::Value(_) => true,
        Expr::UnaryOp {
            op: UnaryOperator::Minus | UnaryOperator::Plus,
            expr,
        }
        | Expr::Nested(expr) => is_literal(expr),
        _ => false,
    }
}

/// `x [NOT] BETWEEN lo AND hi` with a bound that is no literal → its two comparisons.
fn between(e: &mut Expr) {
    let Expr::Between {
        expr,
        negated,
        low,
        high,
    } = e
    else {
        return;
    };
    if is_literal(low) && is_literal(high) {
        return;
    }
    let cmp = |op: BinaryOperator, bound: &Expr| Expr::BinaryOp {
        left: expr.clone(),
        op,
        right: Box::new(bound.clone()),
    };
    let (lo_op, hi_op, join) = if *negated {
        (BinaryOperator::Lt, BinaryOperator::Gt, BinaryOperator::Or)
    } else {
        (BinaryOperator::GtEq, BinaryOperator::LtEq, BinaryOperator::And)
    };
    let rewritten = Expr::Nested(Box::new(Expr::BinaryOp {
        left: Box::new(cmp(lo_op, low)),
        op: join,
        right: Box::new(cmp(hi_op, high)),
    }));
    *e = rewritten;
}
