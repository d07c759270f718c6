//! Gold SQL → parameterised query for a REST endpoint (Live API-Bench §3 "REST", made
//! deterministic: no LLM writes the endpoint).
//!
//! Every literal that a comparison tests a column against (`=`, `!=`, `<`, `<=`, `>`, `>=`,
//! `LIKE`, `BETWEEN`, `IN (…)`, in WHERE, HAVING, JOIN … ON, `CASE WHEN` or a scalar subquery of
//! the SELECT list, at any nesting depth) becomes a
//! numbered bound parameter `?N`. Its name comes from the column and the operator (`country`,
//! `min_age` for `age > x`, `max_age` for `<`, `name_pattern` for LIKE, `excluded_x` for `!=`),
//! its type from the literal (`integer`, `number`, `string`), its description from the column
//! description. Other literals (function arguments, `THEN` values, LIMIT) stay part of the query. Two
//! questions whose SQL differs only in those literal values get the same [`Template::sql`], which
//! is how endpoints are shared.
//!
//! The query text is sqlparser's rendering of the rewritten AST; the build checks that running it
//! with the original values reproduces the gold result, so a rendering difference can only drop a
//! question, never produce a wrong row.

use std::ops::ControlFlow;

use serde_json::{Value as Json, json};
use sqlparser::ast::{
    BinaryOperator, Expr, Query, Select, SelectItem, SetExpr, Statement, TableFactor, UnaryOperator, Value,
    visit_expressions_mut,
};

use super::LowerError;
use super::schema::Schema;
use crate::corpus::Descriptions;

pub use crate::tools::template::{Parameter, Template, slug};

struct Rewriter<'a> {
    schema: &'a Schema,
    descriptions: &'a Descriptions,
    parameters: Vec<Parameter>,
    values: Vec<Json>,
}

impl Rewriter<'_> {
    fn is_column(&self, name: &str) -> bool {
        self.schema.find_column(name).is_some()
    }

    /// The literal value of `e`, if it is one (SQLite reads a double-quoted name that is no
    /// column as a string).
    fn literal(&self, e: &Expr) -> Option<Json> {
        match e {
            Expr::Value(v) => match &v.value {
                Value::Number(n, _) => n
                    .parse::<i64>()
                    .map(Json::from)
                    .ok()
                    .or_else(|| n.parse::<f64>().ok().map(Json::from)),
                Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(json!(s)),
                _ => None,
            },
            Expr::Identifier(id) if id.quote_style == Some('"') && !self.is_column(&id.value) => Some(json!(id.value)),
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr,
            } => match self.literal(expr)? {
                Json::Number(n) if n.is_i64() => Some(json!(-n.as_i64()?)),
                Json::Number(n) => Some(json!(-n.as_f64()?)),
                _ => None,
            },
            Expr::Nested(inner) => self.literal(inner),
            _ => None,
        }
    }

    /// The column a comparison operand reads (through functions, casts and arithmetic).
    fn column(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Identifier(id) if self.is_column(&id.value) => Some(id.value.clone()),
            Expr::CompoundIdentifier(parts) => parts.last().map(|p| p.value.clone()),
            Expr::Nested(x) | Expr::Cast { expr: x, .. } | Expr::UnaryOp { expr: x, .. } => self.column(x),
            Expr::BinaryOp { left, right, .. } => self.column(left).or_else(|| self.column(right)),
            Expr::Function(f) => {
                let mut found = None;
                let _ = sqlparser::ast::visit_expressions(&f.args, |x: &Expr| {
                    if let Some(c) = self.column_leaf(x) {
                        found = Some(c);
                        return ControlFlow::Break(());
                    }
                    ControlFlow::Continue(())
                });
                found.or_else(|| Some(f.name.to_string().to_lowercase()))
            }
            _ => None,
        }
    }

    fn column_leaf(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Identifier(id) if self.is_column(&id.value) => Some(id.value.clone()),
            Expr::CompoundIdentifier(parts) => parts.last().map(|p| p.value.clone()),
            _ => None,
        }
    }

    /// Replaces the literal `slot` by the next placeholder, recording a parameter named
    /// `prefix + column + suffix`.
    fn bind(&mut self, slot: &mut Expr, column: &str, prefix: &str, suffix: &str, role: &str) {
        let Some(value) = self.literal(slot) else { return };
        let kind = match &value {
            Json::Number(n) if n.is_i64() => "integer",
            Json::Number(_) => "number",
            _ => "string",
        };
        let base = format!("{prefix}{}{suffix}", slug(column));
        let mut name = base.clone();
        let mut n = 2;
        while self.parameters.iter().any(|p| p.name == name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        let what = self
            .schema
            .find_column(column)
            .and_then(|(t, c)| {
                self.descriptions
                    .get(&t.to_lowercase())
                    .and_then(|d| d.get(&c.to_lowercase()))
                    .filter(|d| !d.is_empty())
                    .map(|d| format!("{d} ({t}.{c})"))
                    .or_else(|| Some(format!("{c} of {t}")))
            })
            .unwrap_or_else(|| column.to_string());
        self.parameters.push(Parameter {
            name,
            kind: kind.into(),
            description: format!("{role} {what}; {}.", format_of(kind)),
            ..Parameter::default()
        });
        self.values.push(value);
        *slot = Expr::Value(Value::Placeholder(format!("?{}", self.values.len())).with_empty_span());
    }

    fn rewrite(&mut self, e: &mut Expr) {
        match e {
            Expr::BinaryOp { left, op, right } => {
                use BinaryOperator::*;
                let (col_side_left, col) = match (self.column(left), self.column(right)) {
                    (Some(c), _) if self.literal(right).is_some() => (true, c),
                    (_, Some(c)) if self.literal(left).is_some() => (false, c),
                    _ => return,
                };
                // `5 < x` reads as `x > 5`.
                let op = match (op.clone(), col_side_left) {
                    (Lt, false) => Gt,
                    (Gt, false) => Lt,
                    (LtEq, false) => GtEq,
                    (GtEq, false) => LtEq,
                    (o, _) => o,
                };
                let (prefix, role) = match op {
                    Eq => ("", "Exact value (=) of"),
                    NotEq => ("excluded_", "Value excluded (<>) from"),
                    Gt => ("min_", "Exclusive lower bound (>) on"),
                    GtEq => ("min_", "Inclusive lower bound (>=) on"),
                    Lt => ("max_", "Exclusive upper bound (<) on"),
                    LtEq => ("max_", "Inclusive upper bound (<=) on"),
                    _ => return,
                };
                let slot = if col_side_left { right.as_mut() } else { left.as_mut() };
                self.bind(slot, &col, prefix, "", role);
            }
            Expr::Like { expr, pattern, .. } | Expr::ILike { expr, pattern, .. } => {
                if let Some(col) = self.column(expr) {
                    self.bind(
                        pattern,
                        &col,
                        "",
                        "_pattern",
                        "SQL LIKE pattern (% any text, _ one character; case-insensitive for ASCII) matched against",
                    );
                }
            }
            Expr::Between { expr, low, high, .. } => {
                if let Some(col) = self.column(expr) {
                    self.bind(low, &col, "min_", "", "Inclusive lower bound (BETWEEN) on");
                    self.bind(high, &col, "max_", "", "Inclusive upper bound (BETWEEN) on");
                }
            }
            Expr::InList { expr, list, negated } => {
                if let Some(col) = self.column(expr) {
                    let role = if *negated {
                        "A value excluded (NOT IN) from"
                    } else {
                        "One accepted value (IN) of"
                    };
                    for item in list.iter_mut() {
                        self.bind(item, &col, "", "", role);
                    }
                }
            }
            _ => {}
        }
    }

    /// Lifts the comparison literals of the whole query: WHERE, HAVING, JOIN … ON, the
    /// SELECT list (`CASE WHEN col = 'x'`, scalar subqueries) and every nested query.
    fn query(&mut self, q: &mut Query) {
        let _ = visit_expressions_mut(q, |e: &mut Expr| {
            self.rewrite(e);
            ControlFlow::<()>::Continue(())
        });
    }
}

fn first_select(s: &SetExpr) -> Option<&Select> {
    match s {
        SetExpr::Select(s) => Some(s),
        SetExpr::Query(q) => first_select(&q.body),
        SetExpr::SetOperation { left, .. } => first_select(left),
        _ => None,
    }
}

fn return_slug(item: &SelectItem) -> String {
    match item {
        SelectItem::UnnamedExpr(e) => expr_slug(e),
        SelectItem::ExprWithAlias { alias, .. } => slug(&alias.value),
        _ => "all".into(),
    }
}

fn expr_slug(e: &Expr) -> String {
    match e {
        Expr::Identifier(id) => slug(&id.value),
        // The `sort_order` exposure's `CASE WHEN ?1 = 'asc' THEN key END`: the key.
        Expr::Case { conditions, .. } if !conditions.is_empty() => expr_slug(&conditions[0].result),
        Expr::CompoundIdentifier(p) => p.last().map(|p| slug(&p.value)).unwrap_or_default(),
        Expr::Function(f) => {
            let name = f.name.to_string().to_lowercase();
            let arg = f.args.to_string();
            let inner = arg
                .trim_matches(|c| c == '(' || c == ')')
                .rsplit('.')
                .next()
                .unwrap_or("")
                .to_string();
            let word = match name.as_str() {
                "count" if arg.to_uppercase().contains("DISTINCT") => "count_distinct",
                "count" => return "count".into(),
                "avg" => "average",
                "sum" => "total",
                other => other,
            };
            let inner = slug(&inner.replace("DISTINCT", ""));
            if inner.is_empty() || inner == "v_" {
                word.to_string()
            } else {
                format!("{word}_{inner}")
            }
        }
        _ => "value".into(),
    }
}

/// The value format a parameter description states.
fn format_of(kind: &str) -> &'static str {
    match kind {
        "integer" => "an integer",
        "number" => "a number",
        _ => "text",
    }
}

/// Parameterises a gold statement (rules in the module docs). Fails only on statements that are
/// not queries.
pub fn parameterise(stmt: &Statement, schema: &Schema, descriptions: &Descriptions) -> Result<Template, LowerError> {
    let Statement::Query(q) = stmt else {
        return Err(super::unsupported(
            "not_a_query",
            "only SELECT statements become endpoints",
        ));
    };
    let mut q = q.clone();
    let mut rw = Rewriter {
        schema,
        descriptions,
        parameters: vec![],
        values: vec![],
    };
    rw.query(&mut q);
    Ok(template_of(*q, rw.parameters, rw.values))
}

/// The templates a literal-free query can become ([`crate::sql::expose`]), in order of
/// preference, each built when the caller asks for the next one; `pick(table)` names a table's
/// categorical column and its type.
pub fn exposures<'a>(
    template: &Template,
    schema: &'a Schema,
    pick: &'a dyn Fn(&str) -> Option<(String, &'static str)>,
) -> impl Iterator<Item = Template> + 'a {
    let query = match super::parse(&template.sql) {
        Ok(Statement::Query(q)) => Some(q),
        _ => None,
    };
    let kind_of = move |column: &str| {
        schema
            .find_column(column)
            .map(|(t, c)| schema.dtype(t, c))
            .unwrap_or("string")
    };
    (0..super::expose::KINDS).filter_map(move |kind| {
        let e = super::expose::candidate(query.as_ref()?, kind, &kind_of, pick)?;
        Some(template_of(e.query, vec![e.parameter], vec![e.value]))
    })
}

/// A template from a parameterised query: SQL text, key and the naming slugs.
fn template_of(q: Query, parameters: Vec<Parameter>, values: Vec<Json>) -> Template {
    let first = first_select(&q.body);
    let table = first
        .and_then(|s| s.from.first())
        .map(|t| match &t.relation {
            TableFactor::Table { name, .. } => crate::sql::ident::table_name(name),
            _ => "query".into(),
        })
        .unwrap_or_else(|| "query".into());
    let returns = first
        .map(|s| s.projection.iter().map(return_slug).collect())
        .unwrap_or_default();
    let group_by = match first.map(|s| &s.group_by) {
        Some(sqlparser::ast::GroupByExpr::Expressions(exprs, _)) => exprs.iter().map(expr_slug).collect(),
        _ => vec![],
    };
    let order_by = match q.order_by.as_ref().map(|o| &o.kind) {
        Some(sqlparser::ast::OrderByKind::Expressions(exprs)) => exprs
            .iter()
            .map(|o| {
                let s = expr_slug(&o.expr);
                if o.options.asc == Some(false) {
                    format!("{s}_desc")
                } else {
                    s
                }
            })
            .collect(),
        _ => vec![],
    };
    // The `sort_order` exposure sorts by one key twice (ascending and descending branch).
    let mut order_by = order_by;
    order_by.dedup_by(|b, a| b.trim_end_matches("_desc") == a.trim_end_matches("_desc"));
    let limit = match &q.limit_clause {
        Some(sqlparser::ast::LimitClause::LimitOffset {
            limit: Some(Expr::Value(v)),
            ..
        }) => Some(v.value.to_string()),
        _ => None,
    };
    let sql = q.to_string();
    let named: Vec<(String, String)> = parameters.iter().map(|p| (p.name.clone(), p.kind.clone())).collect();
    let key = super::normalise::key(&q, &named);
    let names: Vec<String> = named.into_iter().map(|(n, _)| n).collect();
    let summary = super::describe::summary(&q, &names);
    Template {
        summary,
        sql,
        key,
        parameters,
        values,
        table: slug(&table),
        returns,
        ordered: q.order_by.is_some(),
        group_by,
        order_by,
        limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(sql: &str) -> Template {
        let mut schema = Schema::default();
        schema.add("singer", vec!["name".into(), "age".into(), "country".into()]);
        parameterise(&super::super::parse(sql).unwrap(), &schema, &Default::default()).unwrap()
    }

    #[test]
    fn where_and_having_literals_become_named_parameters() {
        let t = template(
            "SELECT country, count(*) FROM singer WHERE age > 20 AND 40 >= age AND name LIKE '%a%' AND country IN ('France', \"Spain\") GROUP BY country HAVING count(*) > 1",
        );
        let names: Vec<&str> = t.parameters.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "min_age",
                "max_age",
                "name_pattern",
                "country",
                "country_2",
                "min_count"
            ]
        );
        assert_eq!(
            t.values,
            vec![
                json!(20),
                json!(40),
                json!("%a%"),
                json!("France"),
                json!("Spain"),
                json!(1)
            ]
        );
        assert!(
            t.sql.contains("?1") && t.sql.contains("?6") && !t.sql.contains("France"),
            "{}",
            t.sql
        );
        assert_eq!(t.returns, ["country", "count"]);
        assert_eq!(t.table, "singer");
    }

    #[test]
    fn same_shape_same_sql() {
        let a = template("SELECT name FROM singer WHERE country = 'France' ORDER BY age");
        let b = template("SELECT name FROM singer WHERE country = 'Japan' ORDER BY age");
        assert_eq!(a.sql, b.sql);
        assert!(a.ordered);
        assert_ne!(a.values, b.values);
    }
}
