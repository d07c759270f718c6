//! The query-plan IR: a linear description of one SELECT that the tool pool can execute —
//! join, column transforms, AND-ed filters with at most one disjunction, grouping, HAVING,
//! ordering, projection, DISTINCT, LIMIT — and its builder from the sqlparser AST.
//!
//! The builder resolves every column against the [`Schema`] (case-insensitively) to its name in
//! the joined table (`<table>_<column>`, see [`crate::tools::table::safe_name`]) and rejects what
//! the tools cannot express faithfully with a named [`LowerError::Unsupported`] code.

use std::ops::ControlFlow;

use serde_json::{Map, Value as Json, json};
use sqlparser::ast::{
    BinaryOperator, CastKind, DataType, Distinct, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr,
    JoinConstraint, JoinOperator, LimitClause, OrderByKind, Query, Select, SelectItem, SetExpr, Statement, TableFactor,
    UnaryOperator, Value, visit_expressions,
};

use super::schema::Schema;
use super::{LowerError, unsupported};
use crate::tools::table::{JoinCondition, JoinTable, safe_name};

/// A comparison `key <condition> value` (a `filter_data` call).
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// Column of the joined table (or an aggregate column in HAVING).
    pub key: String,
    /// One of the `filter_data` conditions.
    pub condition: &'static str,
    /// The literal (JSON null for IS \[NOT\] NULL).
    pub value: Json,
}

/// A column transformation applied before filtering (a `transform_data` call).
#[derive(Debug, Clone, PartialEq)]
pub struct Transform {
    /// The column replaced by its transformation.
    pub key: String,
    /// `substring`, `abs` or `datetime`.
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
}

impl Measure {
    /// Whether the measure is or contains an aggregate.
    pub fn has_aggregate(&self) -> bool {
        match self {
            Measure::Aggregate { .. } => true,
            Measure::Arith(a, _, b) => a.has_aggregate() || b.has_aggregate(),
            _ => false,
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
    /// GROUP BY column.
    pub group_by: Option<String>,
    /// HAVING comparisons.
    pub having: Vec<Having>,
    /// ORDER BY keys, most significant first.
    pub order_by: Vec<SortKey>,
    /// SELECT items.
    pub projection: Vec<Measure>,
    /// SELECT DISTINCT.
    pub distinct: bool,
    /// LIMIT.
    pub limit: Option<i64>,
    /// Uncorrelated subqueries over the same joined table, in the order their placeholders
    /// `$SUBQUERY_<i>$` appear as condition values: a scalar subquery's single value
    /// (`x > (SELECT avg(x) …)`) or a list (`x [NOT] IN (SELECT y …)`).
    pub subqueries: Vec<QueryPlan>,
    /// Compound SELECT: the operations (`union`, `union_all`, `intersect`, `except`) applied
    /// left to right with the SELECTs of the same joined table that follow this one.
    pub set_ops: Vec<(&'static str, QueryPlan)>,
}

impl QueryPlan {
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

/// Rejects, up front, constructs no lowering handles: CTEs, EXISTS, window functions.
fn reject_unsupported(stmt: &Statement) -> Result<(), LowerError> {
    let Statement::Query(q) = stmt else {
        return Err(unsupported("not_a_query", stmt));
    };
    if q.with.is_some() {
        return Err(unsupported("cte", "WITH"));
    }
    let flow = visit_expressions(stmt, |e| {
        let code = match e {
            Expr::Exists { .. } => Some("exists_subquery"),
            Expr::Function(f) if f.over.is_some() => Some("window"),
            _ => None,
        };
        match code {
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
    reject_unsupported(stmt)?;
    let Statement::Query(q) = stmt else {
        unreachable!("checked above")
    };
    build_query(q, schema)
}

/// The SELECTs of a compound query in SQLite's evaluation order (left to right, one
/// precedence), with the operation joining each to the ones before; `None` for a tree that is
/// not left-deep (parenthesised or precedence-regrouped operands).
fn compound<'q>(body: &'q SetExpr, out: &mut Vec<(&'static str, &'q Select)>) -> Option<()> {
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

/// Builds the plan of one query (top level or a subquery).
fn build_query(q: &Query, schema: &Schema) -> Result<QueryPlan, LowerError> {
    if q.with.is_some() {
        return Err(unsupported("cte", "WITH"));
    }
    if let SetExpr::Select(select) = &*q.body {
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
        if side.join_signature() != first.join_signature() {
            return Err(unsupported(
                "set_operation_other_tables",
                format!("{op} of SELECTs over different joined tables"),
            ));
        }
        if side.projection.len() != first.projection.len() {
            return Err(LowerError::Schema(format!(
                "{op} of SELECTs with different column counts"
            )));
        }
        first.set_ops.push((op, side));
    }
    Ok(first)
}

struct Builder<'s> {
    schema: &'s Schema,
    tables: Vec<JoinTable>,
    joins: Vec<JoinCondition>,
    aliases: Vec<(String, Measure)>,
    transforms: Vec<Transform>,
    subqueries: Vec<QueryPlan>,
}

fn ident_name(name: &sqlparser::ast::ObjectName) -> String {
    name.0
        .iter()
        .map(|p| p.to_string().trim_matches(['"', '`', '[', ']']).to_string())
        .collect::<Vec<_>>()
        .join(".")
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

impl<'s> Builder<'s> {
    fn new(schema: &'s Schema, select: &Select) -> Result<Self, LowerError> {
        let mut b = Builder {
            schema,
            tables: vec![],
            joins: vec![],
            aliases: vec![],
            transforms: vec![],
            subqueries: vec![],
        };
        match select.from.as_slice() {
            [] => return Err(unsupported("no_from", "SELECT without FROM")),
            [one] => {
                b.add_table(&one.relation)?;
                for join in &one.joins {
                    let (kind, constraint) = match &join.join_operator {
                        JoinOperator::Join(c) | JoinOperator::Inner(c) => ("INNER", c),
                        JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => ("LEFT", c),
                        other => {
                            return Err(unsupported(
                                "join_kind",
                                format!("{other:?}").split('(').next().unwrap_or(""),
                            ));
                        }
                    };
                    b.add_table(&join.relation)?;
                    match constraint {
                        JoinConstraint::On(e) => b.add_join_condition(e, kind)?,
                        JoinConstraint::None => {}
                        other => return Err(unsupported("join_condition", format!("{other:?}"))),
                    }
                }
            }
            _ => return Err(unsupported("comma_join", "FROM a, b")),
        }
        Ok(b)
    }

    fn add_table(&mut self, relation: &TableFactor) -> Result<(), LowerError> {
        let TableFactor::Table { name, alias, .. } = relation else {
            return Err(unsupported("derived_table", relation));
        };
        let raw = ident_name(name);
        let (table, _) = self
            .schema
            .table(&raw)
            .ok_or_else(|| LowerError::Schema(format!("no table {raw}")))?;
        let alias = alias
            .as_ref()
            .map_or_else(|| table.to_string(), |a| a.name.value.clone());
        if self.tables.iter().any(|t| t.alias.eq_ignore_ascii_case(&alias)) {
            return Err(LowerError::Schema(format!("alias {alias} used twice")));
        }
        let uses = self
            .tables
            .iter()
            .filter(|t| t.table.eq_ignore_ascii_case(table))
            .count();
        let prefix = if uses == 0 {
            table.to_string()
        } else {
            format!("{table}_{uses}")
        };
        self.tables.push(JoinTable {
            alias,
            table: table.to_string(),
            prefix,
        });
        Ok(())
    }

    fn add_join_condition(&mut self, e: &Expr, kind: &str) -> Result<(), LowerError> {
        match e {
            Expr::Nested(inner) => self.add_join_condition(inner, kind),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                self.add_join_condition(left, kind)?;
                self.add_join_condition(right, kind)
            }
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } => {
                let (li, lc) = self.resolve_raw(left)?;
                let (ri, rc) = self.resolve_raw(right)?;
                let newest = self.tables.len() - 1;
                let ((li, lc), (ri, rc)) = if ri == newest {
                    ((li, lc), (ri, rc))
                } else {
                    ((ri, rc), (li, lc))
                };
                if ri != newest || li == newest {
                    return Err(unsupported("join_condition", e));
                }
                let l = format!("{}.{}", self.tables[li].alias, lc);
                let r = format!("{}.{}", self.tables[ri].alias, rc);
                self.joins.push(JoinCondition(l, r, kind.to_string()));
                Ok(())
            }
            other => Err(unsupported("join_condition", other)),
        }
    }

    /// Resolves a column expression to (table instance index, column name as declared).
    fn resolve_raw(&self, e: &Expr) -> Result<(usize, String), LowerError> {
        let (qualifier, col) = match e {
            Expr::Identifier(id) => (None, id.value.clone()),
            Expr::CompoundIdentifier(ids) if ids.len() == 2 => (Some(ids[0].value.clone()), ids[1].value.clone()),
            Expr::Nested(inner) => return self.resolve_raw(inner),
            other => return Err(unsupported("expression", other)),
        };
        let mut found = None;
        for (i, t) in self.tables.iter().enumerate() {
            if qualifier
                .as_ref()
                .is_some_and(|q| !q.eq_ignore_ascii_case(&t.alias) && !q.eq_ignore_ascii_case(&t.table))
            {
                continue;
            }
            let (_, cols) = self.schema.table(&t.table).expect("table resolved when added");
            if let Some(c) = cols.iter().find(|c| c.eq_ignore_ascii_case(&col)) {
                if found.is_some() {
                    if qualifier.is_some() {
                        continue;
                    }
                    return Err(LowerError::Schema(format!("ambiguous column {e}")));
                }
                found = Some((i, c.clone()));
            }
        }
        found.ok_or_else(|| LowerError::Schema(format!("no column {e}")))
    }

    fn column_key(&self, e: &Expr) -> Result<String, LowerError> {
        let (i, c) = self.resolve_raw(e)?;
        Ok(safe_name(&self.tables[i].prefix, &c))
    }

    fn literal(&self, e: &Expr) -> Option<Json> {
        match e {
            Expr::Value(v) => match &v.value {
                Value::Number(n, _) => number(n),
                Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(json!(s)),
                Value::Boolean(b) => Some(json!(*b as i64)),
                _ => None,
            },
            // SQLite reads a double-quoted identifier that names no column as a string literal.
            Expr::Identifier(id) if id.quote_style == Some('"') && self.resolve_raw(e).is_err() => {
                Some(json!(id.value))
            }
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr,
            } => self.literal(expr).and_then(negate),
            Expr::UnaryOp {
                op: UnaryOperator::Plus,
                expr,
            } => self.literal(expr),
            Expr::Nested(inner) => self.literal(inner),
            _ => None,
        }
    }

    /// The key a WHERE comparison reads: a column, or a transformed column.
    fn filter_key(&mut self, e: &Expr) -> Result<String, LowerError> {
        match e {
            Expr::Substring {
                expr,
                substring_from: Some(start),
                substring_for,
                ..
            } => self.substring(expr, start, substring_for.as_deref(), e),
            Expr::Substring { .. } => Err(unsupported("substring_arguments", e)),
            Expr::Function(f) => {
                let name = ident_name(&f.name).to_lowercase();
                let args = function_args(f)?;
                match (name.as_str(), args.as_slice()) {
                    ("substr" | "substring", [x, start]) => self.substring(x, start, None, e),
                    ("substr" | "substring", [x, start, len]) => self.substring(x, start, Some(len), e),
                    ("abs", [x]) => {
                        let key = self.column_key(x)?;
                        self.add_transform(key.clone(), "abs", json!({}), e)?;
                        Ok(key)
                    }
                    ("strftime", [fmt, x]) => {
                        let pattern = self.literal(fmt).and_then(|v| v.as_str().map(str::to_string));
                        match pattern.as_deref() {
                            Some(p @ ("%Y" | "%m" | "%d")) => {
                                let key = self.column_key(x)?;
                                self.add_transform(key.clone(), "datetime", json!({"pattern": p}), e)?;
                                Ok(key)
                            }
                            _ => Err(unsupported("strftime_format", e)),
                        }
                    }
                    _ => Err(unsupported("function_in_filter", e)),
                }
            }
            Expr::Cast { expr, data_type, .. } if is_numeric_cast(data_type) => self.filter_key(expr),
            Expr::Nested(inner) => self.filter_key(inner),
            _ => self.column_key(e),
        }
    }

    /// `SUBSTR(x, start[, len])` (SQL: 1-based start) as a `substring` transform with a 0-based
    /// `start_index` and an exclusive `end_index` (absent without `len`).
    fn substring(&mut self, x: &Expr, start: &Expr, len: Option<&Expr>, e: &Expr) -> Result<String, LowerError> {
        let key = self.column_key(x)?;
        let int = |b: &Self, v: &Expr| b.literal(v).and_then(|v| v.as_i64());
        let start = int(self, start)
            .filter(|s| *s >= 1)
            .ok_or_else(|| unsupported("substring_arguments", e))?;
        let mut args = Map::new();
        args.insert("start_index".into(), json!(start - 1));
        if let Some(len) = len {
            let len = int(self, len).ok_or_else(|| unsupported("substring_arguments", e))?;
            args.insert("end_index".into(), json!(start - 1 + len));
        }
        self.add_transform(key.clone(), "substring", Json::Object(args), e)?;
        Ok(key)
    }

    fn add_transform(&mut self, key: String, operation: &'static str, args: Json, e: &Expr) -> Result<(), LowerError> {
        if self.transforms.iter().any(|t| t.key == key) {
            return Err(unsupported("repeated_transform", e));
        }
        self.transforms.push(Transform { key, operation, args });
        Ok(())
    }

    /// Lowers a conjunct of the WHERE (or a branch of an OR) to conditions.
    fn conditions(&mut self, e: &Expr, out: &mut Vec<Condition>) -> Result<(), LowerError> {
        match e {
            Expr::Nested(inner) => self.conditions(inner, out),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                self.conditions(left, out)?;
                self.conditions(right, out)
            }
            Expr::BinaryOp { left, op, right } => {
                let flip = |c: &'static str| match c {
                    "greater_than" => "less_than",
                    "less_than" => "greater_than",
                    "greater_than_equal_to" => "less_than_equal_to",
                    "less_than_equal_to" => "greater_than_equal_to",
                    c => c,
                };
                let condition = match op {
                    BinaryOperator::Eq => "equal_to",
                    BinaryOperator::NotEq => "not_equal_to",
                    BinaryOperator::Gt => "greater_than",
                    BinaryOperator::Lt => "less_than",
                    BinaryOperator::GtEq => "greater_than_equal_to",
                    BinaryOperator::LtEq => "less_than_equal_to",
                    BinaryOperator::Or => return Err(unsupported("nested_or", e)),
                    _ => return Err(unsupported("operator", op)),
                };
                if let Expr::Subquery(q) = &**right {
                    let value = self.subquery(q, e)?;
                    let key = self.filter_key(left)?;
                    out.push(Condition { key, condition, value });
                } else if let Expr::Subquery(q) = &**left {
                    let value = self.subquery(q, e)?;
                    let key = self.filter_key(right)?;
                    out.push(Condition {
                        key,
                        condition: flip(condition),
                        value,
                    });
                } else if let Some(value) = self.literal(right) {
                    let key = self.filter_key(left)?;
                    out.push(Condition { key, condition, value });
                } else if let Some(value) = self.literal(left) {
                    let key = self.filter_key(right)?;
                    out.push(Condition {
                        key,
                        condition: flip(condition),
                        value,
                    });
                } else {
                    return Err(unsupported("column_comparison", e));
                }
                Ok(())
            }
            Expr::Between {
                expr,
                negated: false,
                low,
                high,
            } => {
                let (Some(lo), Some(hi)) = (self.literal(low), self.literal(high)) else {
                    return Err(unsupported("between_expression", e));
                };
                let key = self.filter_key(expr)?;
                out.push(Condition {
                    key: key.clone(),
                    condition: "greater_than_equal_to",
                    value: lo,
                });
                out.push(Condition {
                    key,
                    condition: "less_than_equal_to",
                    value: hi,
                });
                Ok(())
            }
            Expr::IsNull(x) => {
                let key = self.filter_key(x)?;
                out.push(Condition {
                    key,
                    condition: "equal_to",
                    value: Json::Null,
                });
                Ok(())
            }
            Expr::IsNotNull(x) => {
                let key = self.filter_key(x)?;
                out.push(Condition {
                    key,
                    condition: "not_equal_to",
                    value: Json::Null,
                });
                Ok(())
            }
            Expr::Like {
                negated: false,
                any: false,
                expr,
                pattern,
                escape_char: None,
            } => {
                let Some(value) = self.literal(pattern) else {
                    return Err(unsupported("like_pattern", e));
                };
                let key = self.filter_key(expr)?;
                out.push(Condition {
                    key,
                    condition: "like",
                    value,
                });
                Ok(())
            }
            Expr::InList {
                expr,
                list,
                negated: true,
            } => {
                let key = self.filter_key(expr)?;
                for item in list {
                    let value = self
                        .literal(item)
                        .ok_or_else(|| unsupported("in_list_expression", item))?;
                    out.push(Condition {
                        key: key.clone(),
                        condition: "not_equal_to",
                        value,
                    });
                }
                Ok(())
            }
            Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => {
                let value = self.subquery(subquery, e)?;
                let key = self.filter_key(expr)?;
                out.push(Condition {
                    key,
                    condition: if *negated { "not_in" } else { "is_in" },
                    value,
                });
                Ok(())
            }
            Expr::Like {
                negated: true,
                any: false,
                expr,
                pattern,
                escape_char: None,
            } => {
                let Some(value) = self.literal(pattern) else {
                    return Err(unsupported("like_pattern", e));
                };
                let key = self.filter_key(expr)?;
                out.push(Condition {
                    key,
                    condition: "not_like",
                    value,
                });
                Ok(())
            }
            Expr::Like { negated: true, .. } => Err(unsupported("not_like", e)),
            Expr::Between { negated: true, .. } => Err(unsupported("not_between", e)),
            Expr::UnaryOp {
                op: UnaryOperator::Not, ..
            } => Err(unsupported("not", e)),
            Expr::InList { .. } => Err(unsupported("nested_or", e)),
            Expr::Case { .. } => Err(unsupported("case", e)),
            _ => Err(unsupported("predicate", e)),
        }
    }

    /// Plans an uncorrelated subquery over this query's joined table and returns the
    /// placeholder `$SUBQUERY_<i>$` its value is referred to by. A subquery naming a column of
    /// the outer query is `correlated_subquery`; one over other tables or joins
    /// `subquery_other_tables`.
    fn subquery(&mut self, q: &Query, e: &Expr) -> Result<Json, LowerError> {
        let plan = build_query(q, self.schema).map_err(|err| match err {
            LowerError::Schema(_) => unsupported("correlated_subquery", e),
            other => other,
        })?;
        let outer = QueryPlan {
            tables: self.tables.clone(),
            joins: self.joins.clone(),
            ..empty_plan()
        };
        if plan.join_signature() != outer.join_signature() {
            return Err(unsupported("subquery_other_tables", e));
        }
        if plan.projection.len() != 1 || !plan.set_ops.is_empty() {
            return Err(unsupported("subquery_shape", e));
        }
        self.subqueries.push(plan);
        Ok(json!(format!("$SUBQUERY_{}$", self.subqueries.len() - 1)))
    }

    /// Splits a disjunction into branches of AND-ed conditions (an `IN` list is one branch per
    /// value).
    fn branches(&mut self, e: &Expr, out: &mut Vec<Vec<Condition>>) -> Result<(), LowerError> {
        match e {
            Expr::Nested(inner) => self.branches(inner, out),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Or,
                right,
            } => {
                self.branches(left, out)?;
                self.branches(right, out)
            }
            Expr::InList {
                expr,
                list,
                negated: false,
            } => {
                let key = self.filter_key(expr)?;
                for item in list {
                    let value = self
                        .literal(item)
                        .ok_or_else(|| unsupported("in_list_expression", item))?;
                    out.push(vec![Condition {
                        key: key.clone(),
                        condition: "equal_to",
                        value,
                    }]);
                }
                Ok(())
            }
            _ => {
                let mut branch = Vec::new();
                self.conditions(e, &mut branch)?;
                out.push(branch);
                Ok(())
            }
        }
    }

    fn conjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
        match e {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                Self::conjuncts(left, out);
                Self::conjuncts(right, out);
            }
            Expr::Nested(inner)
                if matches!(
                    **inner,
                    Expr::BinaryOp {
                        op: BinaryOperator::And,
                        ..
                    }
                ) =>
            {
                Self::conjuncts(inner, out)
            }
            other => out.push(other),
        }
    }

    /// A SELECT / ORDER BY / HAVING expression as a measure.
    fn measure(&mut self, e: &Expr) -> Result<Measure, LowerError> {
        if let Some(v) = self.literal(e) {
            return if v.is_number() {
                Ok(Measure::Literal(v))
            } else {
                Err(unsupported("string_literal_select", e))
            };
        }
        match e {
            Expr::Nested(inner) => self.measure(inner),
            Expr::Cast {
                expr,
                data_type,
                kind: CastKind::Cast,
                ..
            } if is_numeric_cast(data_type) => self.measure(expr),
            Expr::Cast { .. } => Err(unsupported("cast", e)),
            Expr::BinaryOp { left, op, right } => {
                let op = match op {
                    BinaryOperator::Plus => "add",
                    BinaryOperator::Minus => "subtract",
                    BinaryOperator::Multiply => "multiply",
                    BinaryOperator::Divide => "divide",
                    _ => return Err(unsupported("operator", e)),
                };
                Ok(Measure::Arith(
                    Box::new(self.measure(left)?),
                    op,
                    Box::new(self.measure(right)?),
                ))
            }
            Expr::Identifier(id) => {
                if let Some((_, m)) = self.aliases.iter().find(|(a, _)| a.eq_ignore_ascii_case(&id.value)) {
                    if self.resolve_raw(e).is_err() {
                        return Ok(m.clone());
                    }
                }
                Ok(Measure::Column(self.column_key(e)?))
            }
            Expr::CompoundIdentifier(_) => Ok(Measure::Column(self.column_key(e)?)),
            Expr::Function(f) => self.aggregate(e, f),
            Expr::Subquery(_) => Err(unsupported("subquery_in_select", e)),
            Expr::Case { .. } => Err(unsupported("case", e)),
            _ => Err(unsupported("expression", e)),
        }
    }

    fn aggregate(&mut self, e: &Expr, f: &sqlparser::ast::Function) -> Result<Measure, LowerError> {
        let name = ident_name(&f.name).to_lowercase();
        let agg = match name.as_str() {
            "count" => Agg::Count,
            "sum" => Agg::Sum,
            "avg" => Agg::Mean,
            "min" => Agg::Min,
            "max" => Agg::Max,
            _ => return Err(unsupported("function", e)),
        };
        if f.filter.is_some() {
            return Err(unsupported("aggregate_filter", e));
        }
        let FunctionArguments::List(list) = &f.args else {
            return Err(unsupported("function_arguments", e));
        };
        let distinct = matches!(
            list.duplicate_treatment,
            Some(sqlparser::ast::DuplicateTreatment::Distinct)
        );
        let arg = match list.args.as_slice() {
            [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] if agg == Agg::Count => None,
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] => Some(x),
            _ => return Err(unsupported("function_arguments", e)),
        };
        let Some(arg) = arg else {
            return Ok(Measure::Aggregate {
                agg,
                key: None,
                distinct,
                filters: vec![],
            });
        };
        let arg = strip_numeric_cast(arg);
        if let Some(m) = self.case_aggregate(agg, arg, distinct)? {
            return Ok(m);
        }
        if self.literal(arg).is_some() && agg == Agg::Count {
            return Ok(Measure::Aggregate {
                agg,
                key: None,
                distinct,
                filters: vec![],
            });
        }
        let key = self.column_key(arg).map_err(|err| match err {
            LowerError::Unsupported { .. } => unsupported("aggregate_expression", e),
            other => other,
        })?;
        Ok(Measure::Aggregate {
            agg,
            key: Some(key),
            distinct,
            filters: vec![],
        })
    }

    /// `COUNT(CASE WHEN c THEN x [ELSE NULL] END)`, `SUM(CASE WHEN c THEN 1 ELSE 0 END)` and the
    /// `IIF(c, 1, 0)` spelling: an aggregate over the rows satisfying `c`.
    fn case_aggregate(&mut self, agg: Agg, arg: &Expr, distinct: bool) -> Result<Option<Measure>, LowerError> {
        let (cond, then, otherwise): (&Expr, &Expr, Option<&Expr>) = match arg {
            Expr::Case {
                operand: None,
                conditions,
                else_result,
                ..
            } if conditions.len() == 1 => (&conditions[0].condition, &conditions[0].result, else_result.as_deref()),
            Expr::Function(f) if ident_name(&f.name).eq_ignore_ascii_case("iif") => {
                match function_args(f)?.as_slice() {
                    [c, t, o] => (*c, *t, Some(*o)),
                    _ => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        let is_null = |x: Option<&Expr>| x.is_none_or(|x| matches!(x, Expr::Value(v) if v.value == Value::Null));
        let lit = |b: &Self, x: &Expr| b.literal(x).and_then(|v| v.as_i64());
        let mut filters = Vec::new();
        let key = match agg {
            Agg::Count if is_null(otherwise) => match self.literal(then) {
                Some(_) => None,
                None => Some(self.column_key(then)?),
            },
            Agg::Sum if lit(self, then) == Some(1) && otherwise.is_some_and(|o| lit(self, o) == Some(0)) => None,
            _ => return Err(unsupported("case", arg)),
        };
        self.conditions(cond, &mut filters)
            .map_err(|_| unsupported("case", arg))?;
        Ok(Some(Measure::Aggregate {
            agg: Agg::Count,
            key,
            distinct,
            filters,
        }))
    }

    /// The plan of `select`; `q` carries its ORDER BY and LIMIT (`None` for a compound
    /// SELECT's operand).
    fn build(mut self, q: Option<&Query>, select: &Select) -> Result<QueryPlan, LowerError> {
        let mut filters = Vec::new();
        let mut branches = Vec::new();
        if let Some(w) = &select.selection {
            let mut parts = Vec::new();
            Self::conjuncts(w, &mut parts);
            for part in parts {
                let is_or = matches!(
                    part,
                    Expr::BinaryOp {
                        op: BinaryOperator::Or,
                        ..
                    }
                ) || matches!(part, Expr::InList { negated: false, .. })
                    || matches!(part, Expr::Nested(inner) if matches!(**inner, Expr::BinaryOp { op: BinaryOperator::Or, .. }));
                if is_or {
                    if !branches.is_empty() {
                        return Err(unsupported("multiple_or", part));
                    }
                    self.branches(part, &mut branches)?;
                } else {
                    self.conditions(part, &mut filters)?;
                }
            }
        }
        let mut projection = Vec::new();
        for item in &select.projection {
            match item {
                SelectItem::UnnamedExpr(e) => projection.push(self.measure(e)?),
                SelectItem::ExprWithAlias { expr, alias } => {
                    let m = self.measure(expr)?;
                    self.aliases.push((alias.value.clone(), m.clone()));
                    projection.push(m);
                }
                SelectItem::Wildcard(_) => {
                    for t in self.tables.clone() {
                        let (_, cols) = self.schema.table(&t.table).expect("resolved");
                        projection.extend(cols.iter().map(|c| Measure::Column(safe_name(&t.prefix, c))));
                    }
                }
                SelectItem::QualifiedWildcard(..) => return Err(unsupported("qualified_wildcard", item)),
            }
        }
        let group_by = match &select.group_by {
            GroupByExpr::Expressions(exprs, mods) if mods.is_empty() => match exprs.as_slice() {
                [] => None,
                [e] => match self.measure(e)? {
                    Measure::Column(k) => Some(k),
                    _ => return Err(unsupported("group_by_expression", e)),
                },
                _ => return Err(unsupported("group_by_multiple_keys", select.group_by.to_string())),
            },
            other => return Err(unsupported("group_by", other)),
        };
        let mut having = Vec::new();
        if let Some(h) = &select.having {
            let mut parts = Vec::new();
            Self::conjuncts(h, &mut parts);
            for part in parts {
                let Expr::BinaryOp { left, op, right } = part else {
                    return Err(unsupported("having", part));
                };
                if matches!(**right, Expr::Subquery(_)) || matches!(**left, Expr::Subquery(_)) {
                    return Err(unsupported("subquery_in_having", part));
                }
                let condition = match op {
                    BinaryOperator::Eq => "equal_to",
                    BinaryOperator::NotEq => "not_equal_to",
                    BinaryOperator::Gt => "greater_than",
                    BinaryOperator::Lt => "less_than",
                    BinaryOperator::GtEq => "greater_than_equal_to",
                    BinaryOperator::LtEq => "less_than_equal_to",
                    _ => return Err(unsupported("having", part)),
                };
                let value = self.literal(right).ok_or_else(|| unsupported("having", part))?;
                let measure = self.measure(left)?;
                if !matches!(measure, Measure::Aggregate { .. }) {
                    return Err(unsupported("having", part));
                }
                having.push(Having {
                    measure,
                    condition,
                    value,
                });
            }
        }
        let mut order_by = Vec::new();
        if let Some(ob) = q.and_then(|q| q.order_by.as_ref()) {
            let OrderByKind::Expressions(exprs) = &ob.kind else {
                return Err(unsupported("order_by", ob));
            };
            for o in exprs {
                if o.options.nulls_first.is_some() {
                    return Err(unsupported("order_by_nulls", o));
                }
                let measure = self.measure(&o.expr)?;
                order_by.push(SortKey {
                    measure,
                    ascending: o.options.asc.unwrap_or(true),
                });
            }
        }
        let limit = match q.and_then(|q| q.limit_clause.as_ref()) {
            None => None,
            Some(LimitClause::LimitOffset {
                limit,
                offset: None,
                limit_by,
            }) if limit_by.is_empty() => match limit {
                None => None,
                Some(l) => Some(
                    self.literal(l)
                        .and_then(|v| v.as_i64())
                        .ok_or_else(|| unsupported("limit", l))?,
                ),
            },
            Some(other) => return Err(unsupported("offset", other)),
        };
        let distinct = match &select.distinct {
            None => false,
            Some(Distinct::Distinct) => true,
            Some(other) => return Err(unsupported("distinct_on", other)),
        };
        if select.top.is_some() || select.qualify.is_some() || !select.sort_by.is_empty() {
            return Err(unsupported("clause", "TOP/QUALIFY/SORT BY"));
        }
        let plan = QueryPlan {
            tables: self.tables,
            joins: self.joins,
            transforms: self.transforms,
            filters,
            branches,
            group_by,
            having,
            order_by,
            projection,
            distinct,
            limit,
            subqueries: self.subqueries,
            set_ops: vec![],
        };
        if plan.group_by.is_none() && !plan.having.is_empty() {
            return Err(unsupported("having_without_group_by", "HAVING"));
        }
        if plan.projection.iter().any(|m| m.has_aggregate())
            && plan.group_by.is_none()
            && plan.projection.iter().any(|m| matches!(m, Measure::Column(_)))
        {
            return Err(unsupported(
                "bare_column_with_aggregate",
                "SELECT mixes columns and aggregates without GROUP BY",
            ));
        }
        Ok(plan)
    }
}

fn empty_plan() -> QueryPlan {
    QueryPlan {
        tables: vec![],
        joins: vec![],
        transforms: vec![],
        filters: vec![],
        branches: vec![],
        group_by: None,
        having: vec![],
        order_by: vec![],
        projection: vec![],
        distinct: false,
        limit: None,
        subqueries: vec![],
        set_ops: vec![],
    }
}

fn is_numeric_cast(t: &DataType) -> bool {
    let s = t.to_string().to_uppercase();
    ["REAL", "FLOAT", "DOUBLE", "NUMERIC", "DECIMAL"]
        .iter()
        .any(|k| s.starts_with(k))
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
