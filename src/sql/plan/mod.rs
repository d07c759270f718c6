//! The query-plan IR: a linear description of one SELECT that the tool pool can execute —
//! join, column transforms, AND-ed filters with at most one disjunction, grouping, HAVING,
//! ordering, projection, DISTINCT, LIMIT — and its builder from the sqlparser AST.
//!
//! The builder resolves every column against the [`Schema`] (case-insensitively) to its name in
//! the joined table (`<table>_<column>`, see [`crate::tools::table::safe_name`]) and rejects what
//! the tools cannot express faithfully with a named [`LowerError::Unsupported`] code.

mod aggregates;
mod case;
mod derived;
mod exists;
mod filters;
mod joins;
mod negation;
mod ordering;
mod over_groups;
mod rewrite;
mod rowexpr;
mod select;
mod subqueries;

use self::subqueries::build_query;

use std::ops::ControlFlow;

use serde_json::{Value as Json, json};
use sqlparser::ast::{DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Statement, visit_expressions};

use super::schema::Schema;
use super::{LowerError, unsupported};
use crate::tools::table::{JoinCondition, JoinTable};

/// A comparison `key <condition> value`, or `key <condition> other_key` between two columns of
/// the same row (a `filter_data` call).
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// Column of the joined table (or an aggregate column in HAVING).
    pub key: String,
    /// One of the `filter_data` conditions.
    pub condition: &'static str,
    /// The literal (JSON null for IS \[NOT\] NULL); unused (null) with `other_key`.
    pub value: Json,
    /// The column of the same row compared with instead of `value` (`WHERE T1.a > T2.b`;
    /// `filter_data`'s `other_key_name`).
    pub other_key: Option<String>,
}

/// A column transformation applied before filtering (a `transform_data` call).
#[derive(Debug, Clone, PartialEq)]
pub struct Transform {
    /// The column transformed (for `case`, the column written).
    pub key: String,
    /// The column written (`output_key_name`): a new column named after the source column and
    /// the operation (`<key>_year`, `<key>_substr_0_4`, `<key>_abs`), so the source column
    /// stays readable and one column can be transformed several ways; `key` itself for `case`.
    pub output: String,
    /// `substring`, `abs`, `datetime` or `case`.
    pub operation: &'static str,
    /// The operation's arguments.
    pub args: Json,
}

/// Aggregation functions (tool names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agg {
    /// COUNT
    Count,
    /// SUM
    Sum,
    /// AVG → `mean`
    Mean,
    /// MIN
    Min,
    /// MAX
    Max,
}

impl Agg {
    /// The `aggregation_type` value.
    pub fn name(self) -> &'static str {
        match self {
            Agg::Count => "count",
            Agg::Sum => "sum",
            Agg::Mean => "mean",
            Agg::Min => "min",
            Agg::Max => "max",
        }
    }
}

/// A value the query computes: a column, an aggregate, a literal, or arithmetic of these.
#[derive(Debug, Clone, PartialEq)]
pub enum Measure {
    /// A column of the (filtered) joined table.
    Column(String),
    /// An aggregate; `key` None is `COUNT(*)`; `filters` restrict the rows first (the
    /// `COUNT(CASE WHEN c THEN x END)` / `SUM(CASE WHEN c THEN 1 ELSE 0 END)` idiom).
    Aggregate {
        /// The function.
        agg: Agg,
        /// The aggregated column.
        key: Option<String>,
        /// `DISTINCT` inside the call.
        distinct: bool,
        /// Row filters applied before aggregating.
        filters: Vec<Condition>,
    },
    /// A number.
    Literal(Json),
    /// `left <op> right` with op `add`, `subtract`, `multiply`, `divide`.
    Arith(Box<Measure>, &'static str, Box<Measure>),
    /// The single value of a scalar subquery in SELECT (`x * 100.0 / (SELECT COUNT(*) FROM t)`):
    /// its placeholder `$SUBQUERY_<i>$` ([`QueryPlan::subqueries`]).
    Value(String),
}

impl Measure {
    /// Whether the measure is or contains an aggregate.
    pub fn has_aggregate(&self) -> bool {
        match self {
            // A subquery's value is one value, like an aggregate's.
            Measure::Aggregate { .. } | Measure::Value(_) => true,
            Measure::Arith(a, _, b) => a.has_aggregate() || b.has_aggregate(),
            _ => false,
        }
    }
}

/// SQL text of a measure, for reason details: `COUNT(DISTINCT t_c)`, `(a - b)`, `t_c`.
impl std::fmt::Display for Measure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Measure::Column(k) => write!(f, "{k}"),
            Measure::Literal(v) => write!(f, "{v}"),
            Measure::Value(p) => write!(f, "{p}"),
            Measure::Aggregate {
                agg,
                key,
                distinct,
                filters,
            } => {
                let name = match agg {
                    Agg::Mean => "AVG".to_string(),
                    other => other.name().to_uppercase(),
                };
                let arg = key.as_deref().unwrap_or("*");
                let distinct = if *distinct { "DISTINCT " } else { "" };
                write!(f, "{name}({distinct}{arg})")?;
                if !filters.is_empty() {
                    let conds: Vec<String> = filters
                        .iter()
                        .map(|c| format!("{} {} {}", c.key, c.condition, c.value))
                        .collect();
                    write!(f, " FILTER (WHERE {})", conds.join(" AND "))?;
                }
                Ok(())
            }
            Measure::Arith(a, op, b) => {
                let sym = match *op {
                    "add" => "+",
                    "subtract" => "-",
                    "multiply" => "*",
                    "divide" => "/",
                    other => other,
                };
                write!(f, "({a} {sym} {b})")
            }
        }
    }
}

/// One ORDER BY key.
#[derive(Debug, Clone, PartialEq)]
pub struct SortKey {
    /// What to sort by.
    pub measure: Measure,
    /// ASC (SQL's default) or DESC.
    pub ascending: bool,
}

/// A HAVING comparison on an aggregate.
#[derive(Debug, Clone, PartialEq)]
pub struct Having {
    /// The aggregate compared.
    pub measure: Measure,
    /// The `filter_data` condition.
    pub condition: &'static str,
    /// The literal.
    pub value: Json,
}

/// The linear plan of one SELECT.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryPlan {
    /// Table instances, in join order.
    pub tables: Vec<JoinTable>,
    /// Join equalities.
    pub joins: Vec<JoinCondition>,
    /// Column transforms, applied first.
    pub transforms: Vec<Transform>,
    /// AND-ed filters.
    pub filters: Vec<Condition>,
    /// One disjunction: each branch is AND-ed conditions; empty when the WHERE has no OR.
    pub branches: Vec<Vec<Condition>>,
    /// GROUP BY columns, in the query's order; empty without GROUP BY.
    pub group_by: Vec<String>,
    /// HAVING comparisons (AND-ed).
    pub having: Vec<Having>,
    /// One HAVING disjunction: each branch is AND-ed comparisons; empty without OR.
    pub having_branches: Vec<Vec<Having>>,
    /// ORDER BY keys, most significant first.
    pub order_by: Vec<SortKey>,
    /// SELECT items.
    pub projection: Vec<Measure>,
    /// SELECT DISTINCT.
    pub distinct: bool,
    /// LIMIT.
    pub limit: Option<i64>,
    /// OFFSET (`LIMIT n OFFSET m` or SQLite's `LIMIT m, n`): rows skipped before the LIMIT; only
    /// with a LIMIT, as SQLite requires.
    pub offset: Option<i64>,
    /// Uncorrelated subqueries (over this joined table or another), in the order their placeholders
    /// `$SUBQUERY_<i>$` appear as condition values: a scalar subquery's single value
    /// (`x > (SELECT avg(x) …)`) or a list (`x [NOT] IN (SELECT y …)`).
    pub subqueries: Vec<QueryPlan>,
    /// Compound SELECT: the operations (`union`, `union_all`, `intersect`, `except`) applied
    /// left to right with the SELECTs that follow this one (over this joined table or another).
    pub set_ops: Vec<(&'static str, QueryPlan)>,
    /// `SELECT COUNT(*) FROM (<this compound SELECT>)`: the answer is the number of rows of the
    /// set operation (a derived table the tools express as `aggregate_data(count)` on it).
    pub count_rows: bool,
    /// `SELECT AGG(t.c), … FROM (<this grouped SELECT>) t`: the answer is these aggregates of
    /// this plan's groups (each `key` a column of the aggregate table: a GROUP BY column, or the
    /// aggregation's name for its single aggregate); empty otherwise.
    pub over_groups: Vec<Measure>,
}

impl QueryPlan {
    /// Every measure the query computes, in order: the SELECT list, HAVING (all branches), then
    /// ORDER BY.
    pub fn measures(&self) -> impl Iterator<Item = &Measure> {
        self.projection
            .iter()
            .chain(
                self.having
                    .iter()
                    .chain(self.having_branches.iter().flatten())
                    .map(|h| &h.measure),
            )
            .chain(self.order_by.iter().map(|o| &o.measure))
    }

    /// What the join step materialises, independent of aliases: each table instance as
    /// `table/prefix`, each join condition as `prefix.column=prefix.column kind`. Two plans with
    /// the same signature read the same joined table (`$starting_table_var$`).
    pub fn join_signature(&self) -> Vec<String> {
        let prefix = |qualified: &str| -> String {
            match qualified.split_once('.') {
                Some((alias, col)) => {
                    let p = self
                        .tables
                        .iter()
                        .find(|t| t.alias.eq_ignore_ascii_case(alias))
                        .map_or(alias, |t| t.prefix.as_str());
                    format!("{}.{}", p.to_lowercase(), col.to_lowercase())
                }
                None => qualified.to_lowercase(),
            }
        };
        let mut sig: Vec<String> = self
            .tables
            .iter()
            .map(|t| format!("{}/{}", t.table.to_lowercase(), t.prefix.to_lowercase()))
            .collect();
        let mut joins: Vec<String> = self
            .joins
            .iter()
            .map(|j| {
                let (mut a, mut b) = (prefix(&j.0), prefix(&j.1));
                if a > b {
                    std::mem::swap(&mut a, &mut b);
                }
                format!("{a}={b} {}", j.2)
            })
            .collect();
        joins.sort();
        sig.extend(joins);
        sig
    }
}

/// `CURRENT_TIMESTAMP` / `CURRENT_DATE` / `CURRENT_TIME`, or a date function of `'now'`.
fn reads_current_time(f: &sqlparser::ast::Function) -> bool {
    let name = ident_name(&f.name).to_lowercase();
    if ["current_timestamp", "current_date", "current_time"].contains(&name.as_str()) {
        return true;
    }
    let FunctionArguments::List(list) = &f.args else {
        // `DATETIME` without parentheses' arguments is read as a column, never here.
        return false;
    };
    // `DATE()`, `DATETIME()`, `JULIANDAY()`, `STRFTIME('%Y')`: the time value defaults to now.
    let date_function = ["date", "time", "datetime", "julianday", "unixepoch"].contains(&name.as_str());
    if (date_function && list.args.is_empty()) || (name == "strftime" && list.args.len() == 1) {
        return true;
    }
    list.args.iter().any(|a| {
        matches!(a, FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))
            if matches!(&v.value, sqlparser::ast::Value::SingleQuotedString(s) if s.eq_ignore_ascii_case("now")))
    })
}

/// Rejects, up front, constructs no lowering handles: the EXISTS that stay after
/// [`derived::prepare`], window functions, the current time.
fn reject_unsupported(q: &sqlparser::ast::Query) -> Result<(), LowerError> {
    let flow = visit_expressions(q, |e| {
        let code = match e {
            Expr::Exists { .. } => Some("exists_subquery"),
            Expr::Function(f) if f.over.is_some() => Some("window"),
            // The answer depends on the day the query runs: not a fixed gold answer.
            Expr::Function(f) if reads_current_time(f) => Some("current_time"),
            _ => None,
        };
        match code {
            Some("current_time") => ControlFlow::Break(unsupported(
                "current_time",
                format!(
                    "{e}: the answer depends on the date the dataset is built, so no fixed gold answer verifies it"
                ),
            )),
            Some(code) => ControlFlow::Break(unsupported(code, e)),
            None => ControlFlow::Continue(()),
        }
    });
    match flow {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Builds the plan of `stmt` against `schema`.
pub fn build(stmt: &Statement, schema: &Schema) -> Result<QueryPlan, LowerError> {
    let Statement::Query(q) = stmt else {
        return Err(unsupported("not_a_query", stmt));
    };
    let mut q = q.clone();
    rewrite::normalise(&mut q);
    let q = derived::prepare(&q, schema)?;
    reject_unsupported(&q)?;
    build_query(&q, schema)
}

/// The state of one SELECT's lowering: the joined table built so far, SELECT aliases, column
/// transforms and the subqueries planned for its conditions. Its methods live in the
/// construct-family files below.
struct Builder<'s> {
    schema: &'s Schema,
    tables: Vec<JoinTable>,
    joins: Vec<JoinCondition>,
    aliases: Vec<(String, Measure)>,
    transforms: Vec<Transform>,
    subqueries: Vec<QueryPlan>,
    /// WHERE equalities a comma join (`FROM a, b WHERE a.k = b.k`) took as join conditions.
    join_filters: Vec<Expr>,
    /// Conjuncts of INNER joins' ON clauses that are not join equalities (`ON a.x = b.y AND
    /// b.z = 1`): row filters, lowered with the WHERE.
    on_filters: Vec<Expr>,
    /// `USING` / `NATURAL JOIN` columns (lower case) and the table instance an unqualified
    /// reference to them names (the left one, as in SQLite).
    using: Vec<(String, usize)>,
}

/// A function's or object's name as written, unquoted ([`crate::sql::ident::object_name`]).
fn ident_name(name: &sqlparser::ast::ObjectName) -> String {
    crate::sql::ident::object_name(name)
}

fn number(s: &str) -> Option<Json> {
    if let Ok(i) = s.parse::<i64>() {
        return Some(json!(i));
    }
    s.parse::<f64>().ok().filter(|f| f.is_finite()).map(|f| json!(f))
}

fn negate(v: Json) -> Option<Json> {
    if let Some(i) = v.as_i64() {
        return Some(json!(-i));
    }
    v.as_f64().map(|f| json!(-f))
}

fn is_numeric_cast(t: &DataType) -> bool {
    let s = t.to_string().to_uppercase();
    ["REAL", "FLOAT", "DOUBLE", "NUMERIC", "DECIMAL"]
        .iter()
        .any(|k| s.starts_with(k))
}

/// `REAL`, `FLOAT`, `DOUBLE`: the casts whose result is always a real number (SQLite's REAL
/// affinity), unlike `NUMERIC`/`DECIMAL`, which keep integers.
fn is_real_cast(t: &DataType) -> bool {
    let s = t.to_string().to_uppercase();
    ["REAL", "FLOAT", "DOUBLE"].iter().any(|k| s.starts_with(k))
}

fn strip_numeric_cast(e: &Expr) -> &Expr {
    match e {
        Expr::Cast { expr, data_type, .. } if is_numeric_cast(data_type) => strip_numeric_cast(expr),
        Expr::Nested(inner) => strip_numeric_cast(inner),
        other => other,
    }
}

fn function_args(f: &sqlparser::ast::Function) -> Result<Vec<&Expr>, LowerError> {
    let FunctionArguments::List(list) = &f.args else {
        return Err(unsupported("function_arguments", f));
    };
    list.args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
            other => Err(unsupported("function_arguments", other)),
        })
        .collect()
}
