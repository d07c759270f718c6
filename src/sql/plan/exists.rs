//! Correlated `EXISTS` as an `IN` subquery (see [`super::derived`]): `EXISTS (SELECT … FROM f
//! WHERE r AND outer.c = inner.k)` in a positive position of a WHERE (reached from its root
//! through AND / OR only) is `outer.c IN (SELECT inner.k FROM f WHERE r)`. Where EXISTS is true
//! so is IN; where EXISTS is false IN is false or NULL (a NULL `outer.c`, a NULL `inner.k`), and
//! a WHERE keeps neither. `NOT EXISTS` is not `NOT IN` when the list holds NULL: it stays the
//! named drop `exists_subquery`.

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, GroupByExpr, JoinConstraint, JoinOperator, Query, SelectItem, SetExpr, VisitorMut,
};

use super::derived::{and_all, column_refs, conjuncts, has_aggregate, instances};
use crate::sql::ident::{column_ref, same};
use crate::sql::schema::Schema;

/// Rewrites the positive-position `EXISTS` of every SELECT's WHERE (see the module docs).
pub(super) struct ExistsAsIn<'s>(pub(super) &'s Schema);

impl VisitorMut for ExistsAsIn<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        if let SetExpr::Select(select) = &mut *q.body {
            if let Some(w) = &mut select.selection {
                positive_exists(w, self.0);
            }
        }
        ControlFlow::Continue(())
    }
}

fn positive_exists(e: &mut Expr, schema: &Schema) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And | BinaryOperator::Or,
            right,
        } => {
            positive_exists(left, schema);
            positive_exists(right, schema);
        }
        Expr::Nested(inner) => positive_exists(inner, schema),
        Expr::Exists {
            subquery,
            negated: false,
        } => {
            if let Some(rewritten) = exists_as_in(subquery, schema) {
                *e = rewritten;
            }
        }
        _ => {}
    }
}

/// Whether column reference `e` names a column of the subquery's own tables (`Some(true)`), of
/// an outer query (`Some(false)`), or cannot be told (`None`: a derived table's column, unknown).
fn is_inner(e: &Expr, inner: &[(String, Option<String>)], schema: &Schema) -> Option<bool> {
    let (qualifier, col) = column_ref(e)?;
    match qualifier {
        Some(q) => Some(
            inner
                .iter()
                .any(|(a, t)| same(a, &q.value) || t.as_deref().is_some_and(|t| same(t, &q.value))),
        ),
        None => {
            let mut known = true;
            let has = inner
                .iter()
                .any(|(_, t)| match t.as_deref().and_then(|t| schema.table(t)) {
                    Some((_, cols)) => cols.iter().any(|c| same(c, &col.value)),
                    None => {
                        known = false;
                        false
                    }
                });
            if has {
                Some(true)
            } else if known {
                Some(false)
            } else {
                None
            }
        }
    }
}

/// `EXISTS (SELECT … WHERE r AND o = i)` → `o IN (SELECT i … WHERE r)` when `o = i` is the only
/// reference to the outer query and the subquery neither groups, aggregates nor limits.
fn exists_as_in(q: &Query, schema: &Schema) -> Option<Expr> {
    let SetExpr::Select(select) = &*q.body else { return None };
    let plain = q.with.is_none()
        && q.limit_clause.is_none()
        && matches!(&select.group_by, GroupByExpr::Expressions(g, _) if g.is_empty())
        && select.having.is_none()
        && select.projection.iter().all(|i| match i {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => !has_aggregate(e),
            _ => true,
        });
    if !plain {
        return None;
    }
    let inner = instances(&select.from);
    // ON clauses must read the subquery's own tables only.
    for join in select.from.iter().flat_map(|t| &t.joins) {
        if let JoinOperator::Join(JoinConstraint::On(on))
        | JoinOperator::Inner(JoinConstraint::On(on))
        | JoinOperator::Left(JoinConstraint::On(on))
        | JoinOperator::LeftOuter(JoinConstraint::On(on)) = &join.join_operator
        {
            for r in column_refs(on)? {
                if !is_inner(&r, &inner, schema)? {
                    return None;
                }
            }
        }
    }
    let mut parts = Vec::new();
    conjuncts(select.selection.as_ref()?, &mut parts);
    let mut link = None;
    let mut rest = Vec::new();
    for part in parts {
        let refs = column_refs(&part)?;
        let mut outer = false;
        for r in &refs {
            if !is_inner(r, &inner, schema)? {
                outer = true;
            }
        }
        if !outer {
            rest.push(part);
            continue;
        }
        let Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } = &part
        else {
            return None;
        };
        let side = |e: &Expr| -> Option<bool> {
            let refs = column_refs(e)?;
            let kinds: Vec<bool> = refs
                .iter()
                .map(|r| is_inner(r, &inner, schema))
                .collect::<Option<_>>()?;
            match (kinds.iter().all(|k| *k), kinds.iter().all(|k| !*k)) {
                (true, false) => Some(true),
                (false, true) if column_ref(e).is_some() => Some(false),
                _ => None,
            }
        };
        let (o, i) = match (side(left)?, side(right)?) {
            (false, true) => ((**left).clone(), (**right).clone()),
            (true, false) => ((**right).clone(), (**left).clone()),
            _ => return None,
        };
        if link.replace((o, i)).is_some() {
            return None;
        }
    }
    let (o, i) = link?;
    let mut sub = select.clone();
    sub.selection = and_all(rest);
    sub.projection = vec![SelectItem::UnnamedExpr(i)];
    sub.distinct = None;
    let mut query = q.clone();
    query.body = Box::new(SetExpr::Select(sub));
    query.order_by = None;
    Some(Expr::InSubquery {
        expr: Box::new(o),
        subquery: Box::new(query),
        negated: false,
    })
}
