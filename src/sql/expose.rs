//! Query parameters for a gold query that has no literal to lift (issue 12 §2): the paper's
//! generation rules give every API at least one query parameter, so a REST endpoint exposes what
//! a real API would, tried in this order (the build keeps the first whose gold call reproduces the
//! gold result, [`crate::sql::compile`]):
//!
//! 1. the top-level `LIMIT n` as `limit` (integer, default `n`; the gold call passes `n`);
//! 2. the direction of the first top-level `ORDER BY` key as `sort_order` (`asc` / `desc`,
//!    default the gold direction; the gold call passes it), run as
//!    `ORDER BY CASE WHEN ?1 = 'asc' THEN key END ASC, CASE WHEN ?1 = 'desc' THEN key END DESC`;
//! 3. an optional equality filter on the first GROUP BY key (`(?1 IS NULL OR key = ?1)` in WHERE:
//!    omitted, every group is returned, which is what the gold call does);
//! 4. an optional equality filter on a categorical column of the main table (the text column with
//!    the fewest distinct values, 2 to 50, chosen from the data by the caller), likewise omitted by
//!    the gold call.
//!
//! A query none of these fits (e.g. a set operation without ORDER BY or GROUP BY over a table
//! without a categorical column) gets no endpoint: its questions are dropped with the reason code
//! `unsupported:no_query_parameter`.

use serde_json::{Value as Json, json};
use sqlparser::ast::{Expr, GroupByExpr, LimitClause, OrderByExpr, OrderByKind, Query, SetExpr, TableFactor, Value};
use sqlparser::parser::Parser;

use super::rest::{Parameter, slug};

/// One way to give a literal-free query a parameter: the rewritten query (placeholder `?1`), the
/// parameter, and the value the gold call binds (`Null` for an omitted optional filter).
#[derive(Debug, Clone)]
pub struct Exposure {
    /// The query with `?1` in place.
    pub query: Query,
    /// The parameter `?1` binds.
    pub parameter: Parameter,
    /// The bound value of the gold call.
    pub value: Json,
}

fn expr(sql: &str) -> Option<Expr> {
    Parser::new(&super::dialect::Sqlite::new())
        .try_with_sql(sql)
        .ok()?
        .parse_expr()
        .ok()
}

fn placeholder() -> Expr {
    Expr::Value(Value::Placeholder("?1".into()).with_empty_span())
}

/// `LIMIT n` → `LIMIT ?1`.
fn limit(q: &Query) -> Option<Exposure> {
    let Some(LimitClause::LimitOffset {
        limit: Some(Expr::Value(v)),
        ..
    }) = &q.limit_clause
    else {
        return None;
    };
    let Value::Number(n, _) = &v.value else { return None };
    let n: i64 = n.parse().ok()?;
    let mut query = q.clone();
    if let Some(LimitClause::LimitOffset { limit, .. }) = &mut query.limit_clause {
        *limit = Some(placeholder());
    }
    Some(Exposure {
        query,
        parameter: Parameter {
            name: "limit".into(),
            kind: "integer".into(),
            description: format!("Maximum number of rows to return, taken in the sort order (integer; default {n})."),
            optional: true,
            default: Some(json!(n)),
            choices: vec![],
            minimum: Some(0),
        },
        value: json!(n),
    })
}

/// The first `ORDER BY` key's direction → `sort_order`.
fn direction(q: &Query) -> Option<Exposure> {
    let Some(OrderByKind::Expressions(keys)) = q.order_by.as_ref().map(|o| &o.kind) else {
        return None;
    };
    let first = keys.first()?;
    let desc = first.options.asc == Some(false);
    let key = first.expr.to_string();
    let mut query = q.clone();
    let Some(OrderByKind::Expressions(new_keys)) = query.order_by.as_mut().map(|o| &mut o.kind) else {
        return None;
    };
    let branch = |dir: &str, asc: bool| OrderByExpr {
        expr: expr(&format!("CASE WHEN ?1 = '{dir}' THEN {key} END")).expect("a CASE over a parsed key parses"),
        options: sqlparser::ast::OrderByOptions {
            asc: Some(asc),
            nulls_first: None,
        },
        with_fill: None,
    };
    new_keys.splice(0..1, [branch("asc", true), branch("desc", false)]);
    let gold = if desc { "desc" } else { "asc" };
    Some(Exposure {
        query,
        parameter: Parameter {
            name: "sort_order".into(),
            kind: "string".into(),
            description: format!(
                "Sort direction of the rows by {}: `asc` (ascending) or `desc` (descending); default `{gold}`.",
                crate::sql::ident::plain_text(&first.expr)
            ),
            optional: true,
            default: Some(json!(gold)),
            choices: vec!["asc".into(), "desc".into()],
            minimum: None,
        },
        value: json!(gold),
    })
}

/// `… WHERE cond` → `… WHERE (cond) AND (?1 IS NULL OR column = ?1)` on the top-level SELECT.
fn filter(q: &Query, column: &str, name: &str, description: String, kind: &str) -> Option<Exposure> {
    let mut query = q.clone();
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    let test = expr(&format!("(?1 IS NULL OR {column} = ?1)"))?;
    select.selection = Some(match select.selection.take() {
        Some(cond) => expr(&format!("({cond}) AND {test}"))?,
        None => test,
    });
    Some(Exposure {
        query,
        parameter: Parameter {
            name: name.into(),
            kind: kind.into(),
            description,
            optional: true,
            default: None,
            choices: vec![],
            minimum: None,
        },
        value: Json::Null,
    })
}

/// The first GROUP BY key → an optional equality filter on it.
fn group_key(q: &Query, kind_of: &dyn Fn(&str) -> &'static str) -> Option<Exposure> {
    let SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    let GroupByExpr::Expressions(keys, _) = &select.group_by else {
        return None;
    };
    let key = keys.first()?;
    let column = match key {
        Expr::Identifier(i) => i.value.clone(),
        Expr::CompoundIdentifier(p) => p.last()?.value.clone(),
        _ => return None,
    };
    filter(
        q,
        &key.to_string(),
        &slug(&column),
        format!("Only the group whose {column} equals this value (exact match; omit for every group)."),
        kind_of(&column),
    )
}

/// The main table's categorical column → an optional equality filter on it.
fn categorical(q: &Query, pick: &dyn Fn(&str) -> Option<(String, &'static str)>) -> Option<Exposure> {
    let SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    let TableFactor::Table { name, alias, .. } = &select.from.first()?.relation else {
        return None;
    };
    let table = crate::sql::ident::table_name(name);
    let (column, kind) = pick(&table)?;
    let qualifier = alias
        .as_ref()
        .map(|a| a.name.value.clone())
        .unwrap_or_else(|| table.clone());
    filter(
        q,
        &format!("\"{qualifier}\".\"{column}\""),
        &slug(&column),
        format!("Only {table} rows whose {column} equals this value (exact match; omit for all rows)."),
        kind,
    )
}

/// How many kinds of exposure there are ([`candidate`]'s `kind`).
pub const KINDS: usize = 4;

/// The candidate exposure of one kind of a literal-free query, if it has one: `kind` 0 the LIMIT,
/// 1 the sort direction, 2 a GROUP BY key, 3 a categorical column filter (the module's order).
/// `kind_of(column)` gives a column's OpenAPI type; `pick(table)` the categorical column of a
/// table and its type (called only for kind 3).
pub fn candidate(
    q: &Query,
    kind: usize,
    kind_of: &dyn Fn(&str) -> &'static str,
    pick: &dyn Fn(&str) -> Option<(String, &'static str)>,
) -> Option<Exposure> {
    match kind {
        0 => limit(q),
        1 => direction(q),
        2 => group_key(q, kind_of),
        _ => categorical(q, pick),
    }
}

/// The candidate exposures of a literal-free query, in the module's order, each built when the
/// caller asks for the next one ([`candidate`]).
pub fn candidates<'a>(
    q: &'a Query,
    kind_of: &'a dyn Fn(&str) -> &'static str,
    pick: &'a dyn Fn(&str) -> Option<(String, &'static str)>,
) -> impl Iterator<Item = Exposure> + 'a {
    (0..KINDS).filter_map(move |kind| candidate(q, kind, kind_of, pick))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(sql: &str) -> Query {
        let Ok(sqlparser::ast::Statement::Query(q)) = crate::sql::parse(sql) else {
            panic!("{sql}")
        };
        *q
    }

    fn names(sql: &str) -> Vec<(String, String, Json)> {
        candidates(&query(sql), &|_| "string", &|t| {
            (t == "singer").then(|| ("country".to_string(), "string"))
        })
        .into_iter()
        .map(|e| (e.parameter.name, e.query.to_string(), e.value))
        .collect()
    }

    #[test]
    fn limit_direction_group_key_and_categorical_filter_in_order() {
        let c = names("SELECT name FROM singer ORDER BY age DESC LIMIT 3");
        assert_eq!(
            c[0],
            (
                "limit".into(),
                "SELECT name FROM singer ORDER BY age DESC LIMIT ?1".into(),
                json!(3)
            )
        );
        assert_eq!(c[1].0, "sort_order");
        assert_eq!(
            c[1].1,
            "SELECT name FROM singer ORDER BY CASE WHEN ?1 = 'asc' THEN age END ASC, CASE WHEN ?1 = 'desc' THEN age END DESC LIMIT 3"
        );
        assert_eq!(c[1].2, json!("desc"));
        let g = names("SELECT T1.country, count(*) FROM singer AS T1 GROUP BY T1.country");
        assert_eq!(g[0].0, "country");
        assert_eq!(
            g[0].1,
            "SELECT T1.country, count(*) FROM singer AS T1 WHERE (?1 IS NULL OR T1.country = ?1) GROUP BY T1.country"
        );
        assert_eq!(g[0].2, Json::Null);
        let a = names("SELECT count(*) FROM singer WHERE age > (SELECT avg(age) FROM singer)");
        assert_eq!(a.len(), 1);
        assert!(
            a[0].1
                .contains("(age > (SELECT avg(age) FROM singer)) AND (?1 IS NULL OR \"singer\".\"country\" = ?1)"),
            "{}",
            a[0].1
        );
        assert!(names("SELECT name FROM concert UNION SELECT name FROM stadium").is_empty());
    }
}
