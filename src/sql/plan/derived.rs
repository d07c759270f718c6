//! Derived tables, CTEs and correlated `EXISTS` as exact rewrites of the sqlparser AST, before
//! the builder plans the query:
//! - a CTE is inlined as a derived table at each reference (a non-recursive `WITH` is a named
//!   subquery; SQLite gives the same rows whether it materialises it or not);
//! - `EXISTS (SELECT … FROM f WHERE r AND outer.c = inner.k)` in a positive position of a WHERE
//!   (reached from its root through AND / OR only) is `outer.c IN (SELECT inner.k FROM f WHERE
//!   r)`: where EXISTS is false IN is false or NULL, and a WHERE keeps neither (`NOT EXISTS` is
//!   not `NOT IN` when the list holds NULL, and stays a named drop);
//! - a derived table in FROM is merged into the query that reads it (SQLite's own query
//!   flattening, `sqlite.org/optoverview.html#flattening`): when the derived table is a plain
//!   row filter (no GROUP BY, aggregate, DISTINCT or LIMIT) its FROM and WHERE become the outer
//!   query's; when the outer query only picks columns of it, the derived query itself with those
//!   columns is the query;
//! - an INNER JOIN with a derived table `D` on `x = D.k`, where `k` is unique in `D` (D grouped
//!   by `k`, one row by LIMIT 1 or an aggregate without GROUP BY, or DISTINCT `k`) and nothing
//!   else of `D` is read, is the semi-join `x IN (SELECT D.k FROM D)`: each outer row matches at
//!   most one row of `D`, so no row is repeated, and a NULL `x` is dropped by both.
//!
//! Each rewrite removes one construct, so rewriting terminates; what no rewrite applies to keeps
//! its named reason (`derived_table`, `cte`, `exists_subquery`).

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Cte, Expr, GroupByExpr, Ident, JoinConstraint, JoinOperator, LimitClause, Query, Select,
    SelectItem, SetExpr, TableAlias, TableFactor, VisitMut, VisitorMut, visit_expressions, visit_expressions_mut,
};

use crate::sql::ident::{column_ref, same};
use crate::sql::schema::Schema;
use crate::sql::{LowerError, unsupported};

/// The query with its CTEs inlined and the EXISTS of positive WHERE positions as IN subqueries.
pub(super) fn prepare(q: &Query, schema: &Schema) -> Result<Query, LowerError> {
    let mut q = q.clone();
    if let Some(with) = q.with.take() {
        if with.recursive {
            return Err(unsupported("cte", "WITH RECURSIVE"));
        }
        let mut defined: Vec<Cte> = Vec::new();
        for cte in with.cte_tables {
            if !cte.alias.columns.is_empty() {
                return Err(unsupported("cte", format!("WITH {} (column list)", cte.alias)));
            }
            let mut cte = cte;
            let _ = cte.query.visit(&mut Inline(&defined));
            defined.push(cte);
        }
        let _ = q.visit(&mut Inline(&defined));
    }
    let _ = q.visit(&mut super::exists::ExistsAsIn(schema));
    Ok(q)
}

/// Replaces each table reference naming a CTE with the CTE's query as a derived table (aliased
/// as the reference, or by the CTE's name).
struct Inline<'c>(&'c [Cte]);

impl VisitorMut for Inline<'_> {
    type Break = ();

    // After the factor's own parts: the inlined query is not visited again (a CTE named like a
    // table it reads is not inlined into itself).
    fn post_visit_table_factor(&mut self, t: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = t
        {
            let written = crate::sql::ident::object_name(name);
            if let Some(cte) = self.0.iter().find(|c| same(&c.alias.name.value, &written)) {
                let alias = alias.clone().unwrap_or_else(|| TableAlias {
                    name: cte.alias.name.clone(),
                    columns: vec![],
                });
                *t = TableFactor::Derived {
                    lateral: false,
                    subquery: cte.query.clone(),
                    alias: Some(alias),
                };
            }
        }
        ControlFlow::Continue(())
    }
}

/// The table instances of a FROM clause: (alias or name, table name) — `None` as the table of a
/// derived table or other factor.
pub(super) fn instances(from: &[sqlparser::ast::TableWithJoins]) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let relations = from
        .iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)));
    for r in relations {
        match r {
            TableFactor::Table { name, alias, .. } => {
                let table = crate::sql::ident::table_name(name);
                let shown = alias.as_ref().map_or_else(|| table.clone(), |a| a.name.value.clone());
                out.push((shown, Some(table)));
            }
            TableFactor::Derived { alias: Some(a), .. } => out.push((a.name.value.clone(), None)),
            _ => out.push((String::new(), None)),
        }
    }
    out
}

/// Every column reference of `e`, or `None` when `e` holds a subquery.
pub(super) fn column_refs(e: &Expr) -> Option<Vec<Expr>> {
    let mut refs = Vec::new();
    let flow = visit_expressions(e, |x| {
        if matches!(x, Expr::Subquery(_) | Expr::InSubquery { .. } | Expr::Exists { .. }) {
            return ControlFlow::Break(());
        }
        if column_ref(x).is_some() {
            refs.push(x.clone());
        }
        ControlFlow::Continue(())
    });
    flow.is_continue().then_some(refs)
}

pub(super) fn conjuncts(e: &Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            conjuncts(left, out);
            conjuncts(right, out);
        }
        Expr::Nested(inner) => conjuncts(inner, out),
        other => out.push(other.clone()),
    }
}

pub(super) fn and_all(parts: impl IntoIterator<Item = Expr>) -> Option<Expr> {
    parts.into_iter().reduce(|a, b| Expr::BinaryOp {
        left: Box::new(a),
        op: BinaryOperator::And,
        right: Box::new(b),
    })
}

/// Whether `e` calls an aggregate function (or any window function).
pub(super) fn has_aggregate(e: &Expr) -> bool {
    visit_expressions(e, |x| match x {
        Expr::Function(f) => {
            let name = crate::sql::ident::object_name(&f.name).to_lowercase();
            let agg = ["count", "sum", "avg", "min", "max", "total", "group_concat"].contains(&name.as_str());
            if agg || f.over.is_some() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// The items of a SELECT as (the column name SQLite gives it, expression); `None` for `*`.
pub(super) fn outputs(select: &Select) -> Option<Vec<(String, Expr)>> {
    select
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::ExprWithAlias { expr, alias } => Some((alias.value.clone(), expr.clone())),
            SelectItem::UnnamedExpr(e) => {
                let name = column_ref(e).map_or_else(|| e.to_string(), |(_, c)| c.value.clone());
                Some((name, e.clone()))
            }
            _ => None,
        })
        .collect()
}

/// `e` with each reference to a column of the derived table `alias` replaced by the derived
/// table's expression for it; names in `keep` (the outer query's own SELECT aliases) stay.
/// `None` when a reference names nothing the derived table gives, or `e` holds a subquery.
pub(super) fn substitute(e: &Expr, alias: Option<&str>, items: &[(String, Expr)], keep: &[String]) -> Option<Expr> {
    column_refs(e)?;
    let mut e = e.clone();
    let flow = visit_expressions_mut(&mut e, |x| {
        let Some((qualifier, col)) = column_ref(x) else {
            return ControlFlow::Continue(());
        };
        if qualifier.is_some_and(|q| !alias.is_some_and(|a| same(a, &q.value))) {
            return ControlFlow::Break(());
        }
        if qualifier.is_none() && keep.iter().any(|k| same(k, &col.value)) {
            return ControlFlow::Continue(());
        }
        let Some((_, target)) = items.iter().find(|(n, _)| same(n, &col.value)) else {
            return ControlFlow::Break(());
        };
        *x = parenthesised(target.clone());
        ControlFlow::Continue(())
    });
    flow.is_continue().then_some(e)
}

fn parenthesised(e: Expr) -> Expr {
    match e {
        Expr::Identifier(_)
        | Expr::CompoundIdentifier(_)
        | Expr::Function(_)
        | Expr::Value(_)
        | Expr::Nested(_)
        | Expr::Cast { .. } => e,
        other => Expr::Nested(Box::new(other)),
    }
}

pub(super) fn no_group_by(select: &Select) -> bool {
    matches!(&select.group_by, GroupByExpr::Expressions(g, _) if g.is_empty())
}

/// One rewrite of the derived tables of `select` (the body of `q`): a semi-join or a merge (see
/// the module docs); `None` when none applies.
pub(super) fn flatten(q: &Query, select: &Select, schema: &Schema) -> Option<Query> {
    semi_join(q, select).or_else(|| merge(q, select, schema))
}

/// The derived table of `relation`: its alias and its SELECT.
pub(super) fn derived(relation: &TableFactor) -> Option<(Option<&TableAlias>, &Query, &Select)> {
    let TableFactor::Derived {
        lateral: false,
        subquery,
        alias,
    } = relation
    else {
        return None;
    };
    if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) || subquery.with.is_some() {
        return None;
    }
    let SetExpr::Select(inner) = &*subquery.body else {
        return None;
    };
    Some((alias.as_ref(), subquery, inner))
}

fn with_body(q: &Query, select: Select) -> Query {
    let mut out = q.clone();
    out.body = Box::new(SetExpr::Select(Box::new(select)));
    out
}

/// Merges `FROM (<inner>) [AS] t` (the only FROM item) into the query.
fn merge(q: &Query, select: &Select, schema: &Schema) -> Option<Query> {
    let [item] = select.from.as_slice() else { return None };
    if !item.joins.is_empty() {
        return None;
    }
    let (alias, sub, inner) = derived(&item.relation)?;
    let alias = alias.map(|a| a.name.value.as_str());
    let items = outputs(inner)?;
    let own: Vec<String> = select
        .projection
        .iter()
        .filter_map(|i| match i {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
            _ => None,
        })
        .collect();
    let outer_plain = select.selection.is_none()
        && no_group_by(select)
        && select.having.is_none()
        && select.distinct.is_none()
        && q.order_by.is_none()
        && q.limit_clause.is_none();
    let picks_columns = select.projection.iter().all(|i| match i {
        SelectItem::Wildcard(_) => true,
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => !has_aggregate(e),
        _ => false,
    });
    if outer_plain && picks_columns {
        // The outer query picks columns of each derived row: the derived query with those items.
        let mut picked = Vec::new();
        for i in &select.projection {
            match i {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    picked.push(SelectItem::UnnamedExpr(substitute(e, alias, &items, &[])?));
                }
                _ => picked.extend(inner.projection.iter().cloned()),
            }
        }
        let mut merged = inner.clone();
        if let Some(h) = &inner.having {
            merged.having = Some(alias_expr(h, inner, schema)?);
        }
        let mut out = sub.clone();
        if let Some(ob) = &mut out.order_by {
            let sqlparser::ast::OrderByKind::Expressions(exprs) = &mut ob.kind else {
                return None;
            };
            for o in exprs {
                o.expr = alias_expr(&o.expr, inner, schema)?;
            }
        }
        // DISTINCT rows of the derived items are not DISTINCT rows of fewer items; ORDER BY /
        // GROUP BY positions name derived items.
        let same_items = picked.len() == inner.projection.len()
            && picked
                .iter()
                .zip(&items)
                .all(|(p, (_, e))| matches!(p, SelectItem::UnnamedExpr(x) if x == e));
        if (inner.distinct.is_some() && !same_items) || (!same_items && by_position(sub, inner)) {
            return None;
        }
        merged.projection = picked;
        out.body = Box::new(SetExpr::Select(Box::new(merged)));
        return Some(out);
    }
    // A derived table that only filters rows: its FROM and WHERE are the outer query's.
    let row_filter = no_group_by(inner)
        && inner.having.is_none()
        && inner.distinct.is_none()
        && sub.limit_clause.is_none()
        && items.iter().all(|(_, e)| !has_aggregate(e));
    if !row_filter {
        return None;
    }
    let mut merged = (*select).clone();
    merged.from = inner.from.clone();
    let mut projection = Vec::new();
    for i in &select.projection {
        projection.push(match i {
            SelectItem::Wildcard(_) => return None,
            SelectItem::UnnamedExpr(e) => SelectItem::UnnamedExpr(substitute(e, alias, &items, &[])?),
            SelectItem::ExprWithAlias { expr, alias: a } => SelectItem::ExprWithAlias {
                expr: substitute(expr, alias, &items, &[])?,
                alias: a.clone(),
            },
            _ => return None,
        });
    }
    merged.projection = projection;
    let outer_where = match &select.selection {
        Some(w) => Some(substitute(w, alias, &items, &[])?),
        None => None,
    };
    merged.selection = and_all(inner.selection.clone().into_iter().chain(outer_where));
    if let GroupByExpr::Expressions(g, _) = &mut merged.group_by {
        for e in g.iter_mut() {
            *e = substitute(e, alias, &items, &own)?;
        }
    } else {
        return None;
    }
    if let Some(h) = &select.having {
        merged.having = Some(substitute(h, alias, &items, &own)?);
    }
    let mut out = with_body(q, merged);
    let aggregated = !no_group_by(select)
        || select.projection.iter().any(
            |i| matches!(i, SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } if has_aggregate(e)),
        );
    match &mut out.order_by {
        Some(ob) => {
            let sqlparser::ast::OrderByKind::Expressions(exprs) = &mut ob.kind else {
                return None;
            };
            for o in exprs {
                o.expr = substitute(&o.expr, alias, &items, &own)?;
            }
        }
        // Unordered outer rows keep the derived table's order (SQLite's flattening does).
        None if !aggregated && select.distinct.is_none() => {
            if by_position(sub, inner) {
                return None;
            }
            out.order_by = sub.order_by.clone();
        }
        None => {}
    }
    Some(out)
}

/// `e` (of `select`'s HAVING or ORDER BY) with unqualified references to its SELECT aliases
/// replaced by the aliased expressions (the aliased items may be left out of a merged
/// projection). `None` when an alias is also a column name of its tables (which one SQLite reads
/// would need its resolution rules).
fn alias_expr(e: &Expr, select: &Select, schema: &Schema) -> Option<Expr> {
    let aliases: Vec<(String, Expr)> = select
        .projection
        .iter()
        .filter_map(|i| match i {
            SelectItem::ExprWithAlias { expr, alias } => Some((alias.value.clone(), expr.clone())),
            _ => None,
        })
        .collect();
    let tables = instances(&select.from);
    let mut e = e.clone();
    let flow = visit_expressions_mut(&mut e, |x| {
        let Expr::Identifier(id) = x else {
            return ControlFlow::Continue(());
        };
        let Some((_, target)) = aliases.iter().find(|(a, _)| same(a, &id.value)) else {
            return ControlFlow::Continue(());
        };
        let column = tables
            .iter()
            .any(|(_, t)| match t.as_deref().and_then(|t| schema.table(t)) {
                Some((_, cols)) => cols.iter().any(|c| same(c, &id.value)),
                None => true,
            });
        if column {
            return ControlFlow::Break(());
        }
        *x = parenthesised(target.clone());
        ControlFlow::Continue(())
    });
    flow.is_continue().then_some(e)
}

/// Whether column `k` (an output name) is unique in the derived query `q` / `select`.
fn unique_in(k: &str, q: &Query, select: &Select, items: &[(String, Expr)]) -> bool {
    let one_row = matches!(&q.limit_clause, Some(LimitClause::LimitOffset { limit: Some(Expr::Value(v)), offset: None, .. })
        if v.value.to_string() == "1");
    let aggregate_only = no_group_by(select) && items.iter().all(|(_, e)| has_aggregate(e));
    let Some((_, key)) = items.iter().find(|(n, _)| same(n, k)) else {
        return false;
    };
    let grouped_by_key = matches!(&select.group_by, GroupByExpr::Expressions(g, _)
        if g.len() == 1 && column_ref(&g[0]).zip(column_ref(key)).is_some_and(|((_, a), (_, b))| same(&a.value, &b.value)));
    let distinct_key = matches!(select.distinct, Some(sqlparser::ast::Distinct::Distinct)) && items.len() == 1;
    one_row || aggregate_only || grouped_by_key || distinct_key
}

/// An INNER JOIN with a derived table read only through a unique join key, as an IN subquery.
fn semi_join(q: &Query, select: &Select) -> Option<Query> {
    let [item] = select.from.as_slice() else { return None };
    let left_join = item
        .joins
        .iter()
        .any(|j| !matches!(j.join_operator, JoinOperator::Join(_) | JoinOperator::Inner(_)));
    if left_join {
        return None;
    }
    let (at, join) = item
        .joins
        .iter()
        .enumerate()
        .find(|(_, j)| derived(&j.relation).is_some())?;
    let (Some(alias), sub, inner) = derived(&join.relation)? else {
        return None;
    };
    let d = alias.name.value.as_str();
    let items = outputs(inner)?;
    let (JoinOperator::Join(JoinConstraint::On(on)) | JoinOperator::Inner(JoinConstraint::On(on))) =
        &join.join_operator
    else {
        return None;
    };
    let reads_d = |e: &Expr| -> Option<bool> {
        Some(column_refs(e)?.iter().any(|r| match column_ref(r) {
            Some((Some(q), _)) => same(&q.value, d),
            Some((None, c)) => items.iter().any(|(n, _)| same(n, &c.value)),
            None => false,
        }))
    };
    // Nothing but this ON clause reads D.
    let mut elsewhere: Vec<&Expr> = Vec::new();
    for i in &select.projection {
        match i {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => elsewhere.push(e),
            _ => return None,
        }
    }
    elsewhere.extend(select.selection.iter());
    elsewhere.extend(select.having.iter());
    if let GroupByExpr::Expressions(g, _) = &select.group_by {
        elsewhere.extend(g.iter());
    }
    if let Some(ob) = &q.order_by {
        if let sqlparser::ast::OrderByKind::Expressions(exprs) = &ob.kind {
            elsewhere.extend(exprs.iter().map(|o| &o.expr));
        }
    }
    for (i, j) in item.joins.iter().enumerate() {
        if i != at {
            if let JoinOperator::Join(JoinConstraint::On(e)) | JoinOperator::Inner(JoinConstraint::On(e)) =
                &j.join_operator
            {
                elsewhere.push(e);
            }
        }
    }
    for e in elsewhere {
        if reads_d(e)? {
            return None;
        }
    }
    let mut parts = Vec::new();
    conjuncts(on, &mut parts);
    let mut link = None;
    let mut rest = Vec::new();
    for part in parts {
        if !reads_d(&part)? {
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
        let key_of = |e: &Expr| match column_ref(e) {
            Some((Some(q), c)) if same(&q.value, d) => Some(c.value.clone()),
            _ => None,
        };
        let (x, k) = match (key_of(left), key_of(right)) {
            (None, Some(k)) if !reads_d(left)? => ((**left).clone(), k),
            (Some(k), None) if !reads_d(right)? => ((**right).clone(), k),
            _ => return None,
        };
        if link.replace((x, k)).is_some() {
            return None;
        }
    }
    let (x, k) = link?;
    if !unique_in(&k, sub, inner, &items) {
        return None;
    }
    let pick = Select {
        projection: vec![SelectItem::UnnamedExpr(Expr::CompoundIdentifier(vec![
            alias.name.clone(),
            Ident::new(k),
        ]))],
        from: vec![sqlparser::ast::TableWithJoins {
            relation: join.relation.clone(),
            joins: vec![],
        }],
        selection: None,
        having: None,
        distinct: None,
        group_by: GroupByExpr::Expressions(vec![], vec![]),
        ..(*select).clone()
    };
    let mut pick_query = q.clone();
    pick_query.body = Box::new(SetExpr::Select(Box::new(pick)));
    pick_query.order_by = None;
    pick_query.limit_clause = None;
    let membership = Expr::InSubquery {
        expr: Box::new(x),
        subquery: Box::new(pick_query),
        negated: false,
    };
    let mut out = (*select).clone();
    out.from[0].joins.remove(at);
    out.selection = and_all(select.selection.clone().into_iter().chain(rest).chain([membership]));
    Some(with_body(q, out))
}

/// Whether `select` (the body of `q`) names a SELECT item by its position in ORDER BY or GROUP
/// BY (`ORDER BY 2`).
fn by_position(q: &Query, select: &Select) -> bool {
    let mut keys: Vec<&Expr> = Vec::new();
    if let Some(ob) = &q.order_by {
        if let sqlparser::ast::OrderByKind::Expressions(exprs) = &ob.kind {
            keys.extend(exprs.iter().map(|o| &o.expr));
        }
    }
    if let GroupByExpr::Expressions(g, _) = &select.group_by {
        keys.extend(g.iter());
    }
    keys.iter().any(|e| matches!(e, Expr::Value(_)))
}
