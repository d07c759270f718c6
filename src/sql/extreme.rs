//! SQLite's bare-column rule for MIN/MAX: in `SELECT b, MAX(v) FROM … [GROUP BY k]` the bare
//! column `b` (neither aggregated nor a GROUP BY key) takes its value from the row holding the
//! extreme (SQLite "Bare columns in an aggregate query"). The lowering reproduces it by sorting
//! the rows on `v` before grouping ([`crate::sql::slot`]), so a group's first row holds the
//! extreme; the answer is the engine's arbitrary pick when several rows of one group hold the
//! extreme with different bare values (reason code `bare_column_tie`). Without MIN/MAX, a bare
//! column of a grouped query (`SELECT name, count(*) … GROUP BY city`) takes its value from an
//! arbitrary row of the group: kept only when it is constant within every group (functionally
//! dependent on the keys, as `T1.name` on `GROUP BY T1.id`), else `bare_column_tie` too.

use sqlparser::ast::{Expr, GroupByExpr, OrderByKind, Select, SelectItem, SetExpr, Statement};

use super::plan::{Agg, Measure, QueryPlan};
use crate::tools::table::query_rows;
use crate::verify::Datum;

impl QueryPlan {
    /// `Some((agg, column))` when the query's only aggregate is `MIN(column)` or `MAX(column)`
    /// and the SELECT list has a bare column beside it (SQLite's bare-column rule applies).
    pub fn bare_extreme(&self) -> Option<(Agg, &str)> {
        let mut aggs: Vec<&Measure> = Vec::new();
        for m in self.measures() {
            match m {
                Measure::Aggregate { .. } if !aggs.contains(&m) => aggs.push(m),
                Measure::Arith(..) if m.has_aggregate() => return None,
                _ => {}
            }
        }
        let [
            Measure::Aggregate {
                agg: agg @ (Agg::Min | Agg::Max),
                key: Some(key),
                filters,
                ..
            },
        ] = aggs.as_slice()
        else {
            return None;
        };
        let bare = self
            .projection
            .iter()
            .any(|m| matches!(m, Measure::Column(c) if !self.group_by.contains(c)));
        (bare && filters.is_empty()).then_some((*agg, key.as_str()))
    }
}

/// For a query under SQLite's bare-column rule ([`QueryPlan::bare_extreme`]): `Err(detail)` when
/// some group has several rows at its extreme (or only NULLs) whose bare columns differ, so the
/// gold row is the engine's pick. Runs one SQL query over the gold query's FROM and WHERE.
/// Any other grouped query with a bare column: `Err(detail)` when the bare column takes several
/// values within one group. Each SELECT of a compound query is checked with its own plan. A query whose probe cannot be built is
/// refused: the lowering would otherwise be kept on the chance that the executor's pick agrees
/// with SQLite's.
pub fn extreme_row_ties(conn: &rusqlite::Connection, stmt: &Statement, plan: &QueryPlan) -> Result<(), String> {
    let branches: Vec<&QueryPlan> = std::iter::once(plan)
        .chain(plan.set_ops.iter().map(|(_, p)| p))
        .collect();
    if !branches.iter().any(|p| needs_check(p)) {
        return Ok(());
    }
    let mut selects = Vec::new();
    let (flat, order) = match stmt {
        Statement::Query(q) => (selects_of(&q.body, &mut selects), order_exprs(q)),
        _ => (false, None),
    };
    if !flat || selects.len() != branches.len() {
        return Err("bare column: its values cannot be checked (not a SELECT or a compound of SELECTs)".into());
    }
    // The ORDER BY of a single SELECT sorts by its bare columns' values too.
    let order = match (order, branches.len()) {
        (Some(o), 1) if o.len() == plan.order_by.len() => o,
        _ if bare_order(plan).next().is_some() => {
            return Err("bare column in ORDER BY: its values cannot be checked".into());
        }
        _ => Vec::new(),
    };
    selects
        .into_iter()
        .zip(branches)
        .enumerate()
        .try_for_each(|(i, (select, p))| {
            let order: Vec<&Expr> = match i {
                0 => bare_order(p).map(|k| order[k]).collect(),
                _ => Vec::new(),
            };
            branch_ties(conn, select, p, &order)
        })
}

/// The top-level ORDER BY expressions of `q` (`None` for `ORDER BY ALL`).
fn order_exprs(q: &sqlparser::ast::Query) -> Option<Vec<&Expr>> {
    match &q.order_by {
        None => Some(Vec::new()),
        Some(o) => match &o.kind {
            OrderByKind::Expressions(exprs) => Some(exprs.iter().map(|e| &e.expr).collect()),
            OrderByKind::All(_) => None,
        },
    }
}

/// The positions of a grouped query's ORDER BY keys that are bare columns (neither a group key
/// nor an aggregate, nor an item of the SELECT list, which [`needs_check`] covers): SQLite sorts
/// by their value in its pick of a row per group (issue 48 D1: `SELECT Country FROM singer GROUP
/// BY Country ORDER BY Age`).
fn bare_order(plan: &QueryPlan) -> impl Iterator<Item = usize> + '_ {
    plan.order_by.iter().enumerate().filter_map(move |(i, o)| {
        let bare = !plan.group_by.is_empty()
            && matches!(&o.measure, Measure::Column(c) if !plan.group_by.contains(c))
            && !plan.projection.contains(&o.measure);
        bare.then_some(i)
    })
}

/// Whether a branch's answer rests on SQLite's choice of a row for a bare column: the MIN/MAX
/// rule, or a bare column in a grouped query.
fn needs_check(plan: &QueryPlan) -> bool {
    bare_order(plan).next().is_some()
        || plan.bare_extreme().is_some()
        || (!plan.group_by.is_empty()
            && plan
                .projection
                .iter()
                .any(|m| matches!(m, Measure::Column(c) if !plan.group_by.contains(c))))
}

/// The SELECTs of a query body, left to right (the order the plan's `set_ops` follow); `false`
/// for anything else (VALUES, a parenthesised query).
fn selects_of<'a>(body: &'a SetExpr, out: &mut Vec<&'a Select>) -> bool {
    match body {
        SetExpr::Select(s) => {
            out.push(s);
            true
        }
        SetExpr::SetOperation { left, right, .. } => selects_of(left, out) && selects_of(right, out),
        _ => false,
    }
}

/// [`extreme_row_ties`] for one SELECT and its plan; `order`: its bare ORDER BY columns.
fn branch_ties(conn: &rusqlite::Connection, select: &Select, plan: &QueryPlan, order: &[&Expr]) -> Result<(), String> {
    let agg = match plan.bare_extreme() {
        Some((agg, _)) => agg,
        None if needs_check(plan) => return bare_values_per_group(conn, select, plan, order),
        None => return Ok(()),
    };
    let Parts {
        keys,
        bare,
        value,
        from,
        filter,
    } = parts(
        select,
        plan,
        order,
        "bare column beside MIN/MAX: the extreme's ties cannot be checked",
    )?;
    let Some(value) = value else {
        return Err(
            "bare column beside MIN/MAX: the extreme's ties cannot be checked (the MIN/MAX is not in the SELECT list)"
                .into(),
        );
    };
    let mut r_items: Vec<String> = keys.iter().enumerate().map(|(i, k)| format!("{k} AS k_{i}")).collect();
    r_items.push(format!("{value} AS v_"));
    r_items.extend(bare.iter().enumerate().map(|(i, b)| format!("{b} AS b_{i}")));
    let k_names: Vec<String> = (0..keys.len()).map(|i| format!("k_{i}")).collect();
    let func = if agg == Agg::Min { "min" } else { "max" };
    let g_items: Vec<String> = k_names.iter().cloned().chain([format!("{func}(v_) AS m_")]).collect();
    let group = |prefix: &str| match k_names.is_empty() {
        true => String::new(),
        false => format!(
            " GROUP BY {}",
            k_names
                .iter()
                .map(|k| format!("{prefix}{k}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let on: Vec<String> = k_names
        .iter()
        .map(|k| format!("r.{k} IS g.{k}"))
        .chain(["(r.v_ = g.m_ OR g.m_ IS NULL)".to_string()])
        .collect();
    let bare_text = (0..bare.len())
        .map(|i| format!("quote(r.b_{i})"))
        .collect::<Vec<_>>()
        .join(" || ',' || ");
    let with = format!(
        "WITH r AS (SELECT {} FROM {from}{filter}), g AS (SELECT {} FROM r{})",
        r_items.join(", "),
        g_items.join(", "),
        group(""),
    );
    let count = |sql: String| -> Result<i64, String> {
        let rows = query_rows(conn, &sql).map_err(|e| format!("the extreme-row check failed: {e}; SQL: {sql}"))?;
        Ok(match rows.first().and_then(|r| r.first()) {
            Some(Datum::Int(n)) => *n,
            _ => 0,
        })
    };
    let n = count(format!(
        "{with} SELECT count(DISTINCT {bare_text}) AS n FROM r JOIN g ON {}{} ORDER BY n DESC LIMIT 1",
        on.join(" AND "),
        group("r."),
    ))?;
    if n > 1 {
        return Err(format!(
            "{}({value}) with bare columns: a group has {n} different bare values at its extreme (or only NULLs), so SQLite's pick is arbitrary",
            func.to_uppercase()
        ));
    }
    // MIN's lowering filters NULL cells out before sorting: a group with only NULLs would vanish.
    if agg == Agg::Min && count(format!("{with} SELECT count(*) FROM g WHERE m_ IS NULL"))? > 0 {
        return Err(format!(
            "MIN({value}) with bare columns: a group holds only NULLs there, and its bare values are SQLite's pick"
        ));
    }
    Ok(())
}

/// What the probes take from the gold query: its GROUP BY keys, the bare columns (neither
/// aggregated nor keys) of its SELECT list, the MIN/MAX argument when the SELECT list has one,
/// its FROM and WHERE.
struct Parts<'a> {
    keys: Vec<&'a Expr>,
    bare: Vec<&'a Expr>,
    value: Option<Expr>,
    from: String,
    filter: String,
}

/// [`Parts`] of one SELECT, or `Err("<what>: (why)")` when the probes cannot be built from it.
fn parts<'a>(select: &'a Select, plan: &QueryPlan, order: &[&'a Expr], what: &str) -> Result<Parts<'a>, String> {
    let unchecked = |why: &str| Err(format!("{what} ({why})"));
    let keys: Vec<&Expr> = match &select.group_by {
        GroupByExpr::Expressions(exprs, _) => exprs.iter().collect(),
        _ => return unchecked("GROUP BY ALL"),
    };
    let items: Vec<&Expr> = select
        .projection
        .iter()
        .filter_map(|i| match i {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
            _ => None,
        })
        .collect();
    if items.len() != plan.projection.len() {
        return unchecked("a wildcard in the SELECT list");
    }
    // `GROUP BY 1` or `GROUP BY <alias>` would group the probe by a constant or a missing name.
    let aliases: Vec<&str> = select
        .projection
        .iter()
        .filter_map(|i| match i {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.as_str()),
            _ => None,
        })
        .collect();
    if keys.iter().any(|k| match k {
        Expr::Value(_) => true,
        Expr::Identifier(id) => aliases.iter().any(|a| a.eq_ignore_ascii_case(&id.value)),
        _ => false,
    }) {
        return unchecked("GROUP BY a position or a SELECT alias");
    }
    let bare: Vec<&Expr> = items
        .iter()
        .zip(&plan.projection)
        .filter(|(_, m)| matches!(m, Measure::Column(c) if !plan.group_by.contains(c)))
        .map(|(e, _)| *e)
        .chain(order.iter().copied())
        .collect();
    let value = items.iter().zip(&plan.projection).find_map(|(e, m)| match (e, m) {
        (Expr::Function(f), Measure::Aggregate { .. }) => match &f.args {
            sqlparser::ast::FunctionArguments::List(l) => match l.args.as_slice() {
                [sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(v))] => Some(v.clone()),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    });
    Ok(Parts {
        keys,
        bare,
        value,
        from: select.from.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "),
        filter: select
            .selection
            .as_ref()
            .map(|w| format!(" WHERE {w}"))
            .unwrap_or_default(),
    })
}

/// A grouped query with a bare column and no MIN/MAX rule (`SELECT name, count(*) … GROUP BY
/// city`): SQLite takes the bare value from an arbitrary row of each group, so when some group
/// holds several different values the gold is the engine's pick, and a lowering that reads the
/// group's first row would verify only by luck: `Err(detail)` (reason `bare_column_tie`). A
/// bare column that is constant within every group (`SELECT T1.name, count(*) … GROUP BY
/// T1.id`) is `Ok`. One SQL query over the gold query's FROM and WHERE.
fn bare_values_per_group(
    conn: &rusqlite::Connection,
    select: &Select,
    plan: &QueryPlan,
    order: &[&Expr],
) -> Result<(), String> {
    let Parts {
        keys,
        bare,
        from,
        filter,
        ..
    } = parts(
        select,
        plan,
        order,
        "bare column in a grouped query: its values per group cannot be checked",
    )?;
    let items: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("{k} AS k_{i}"))
        .chain(bare.iter().enumerate().map(|(i, b)| format!("{b} AS b_{i}")))
        .collect();
    let bare_text = (0..bare.len())
        .map(|i| format!("quote(b_{i})"))
        .collect::<Vec<_>>()
        .join(" || ',' || ");
    let group = (0..keys.len()).map(|i| format!("k_{i}")).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "WITH r AS (SELECT {} FROM {from}{filter}) SELECT count(DISTINCT {bare_text}) AS n FROM r GROUP BY {group} ORDER BY n DESC LIMIT 1",
        items.join(", ")
    );
    let rows = query_rows(conn, &sql).map_err(|e| format!("the bare-column check failed: {e}; SQL: {sql}"))?;
    match rows.first().and_then(|r| r.first()) {
        Some(Datum::Int(n)) if *n > 1 => Err(format!(
            "bare column {} in a grouped query: a group holds {n} different values, so SQLite's pick is arbitrary",
            bare.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(", ")
        )),
        _ => Ok(()),
    }
}
