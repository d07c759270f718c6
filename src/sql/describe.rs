//! What a parameterised query computes, in words: the summary of a REST endpoint (issue 12 §1).
//!
//! Rendered from the sqlparser AST (not the SQL text), clause by clause:
//! - what is returned: each SELECT item (`count(*)` → "the number of rows", `avg(x)` → "the
//!   average x", `count(DISTINCT x)` → "the number of distinct x", …), and "distinct" for
//!   `SELECT DISTINCT`;
//! - from which entities: the FROM table and each join with its condition ("singer joined with
//!   concert on concert.singer_id = singer.singer_id");
//! - every filter of WHERE, HAVING and nested queries, with its operator in words ("equals",
//!   "is greater than", "matches the LIKE pattern", "is one of", "is among", "is missing", …),
//!   OR branches and subqueries included ("weight is less than (the average weight of cars_data)");
//! - grouping, ordering (the `sort_order` parameter's direction), `LIMIT` and set operations.
//!
//! A parameter appears as `{name}`; columns as `table.column` when the scope reads several
//! tables (aliases resolved), else as `column`. Anything without a phrase is quoted as SQL, so
//! the summary never drops part of the query's meaning.

use std::collections::BTreeMap;

use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, JoinConstraint, JoinOperator,
    LimitClause, OrderByKind, Query, Select, SelectItem, SetExpr, SetOperator, SetQuantifier, TableFactor,
    UnaryOperator, Value,
};

/// Placeholder number (1-based) → parameter name.
type Names<'a> = &'a [String];

struct Describer<'a> {
    names: Names<'a>,
    /// Alias scopes, innermost last: alias (lower case) → table; with the scope's table count.
    scopes: std::cell::RefCell<Vec<(BTreeMap<String, String>, usize)>>,
}

/// The operator words of a comparison (`column <op> value`).
pub fn operator_words(op: &BinaryOperator) -> Option<&'static str> {
    use BinaryOperator::*;
    Some(match op {
        Eq => "equals",
        NotEq => "differs from",
        Gt => "is greater than",
        GtEq => "is at least",
        Lt => "is less than",
        LtEq => "is at most",
        _ => return None,
    })
}

fn flipped(op: &BinaryOperator) -> BinaryOperator {
    use BinaryOperator::*;
    match op {
        Gt => Lt,
        Lt => Gt,
        GtEq => LtEq,
        LtEq => GtEq,
        o => o.clone(),
    }
}

fn table_name(f: &TableFactor) -> Option<(String, Option<String>)> {
    match f {
        TableFactor::Table { name, alias, .. } => Some((
            crate::sql::ident::table_name(name),
            alias.as_ref().map(|a| a.name.value.clone()),
        )),
        _ => None,
    }
}

impl Describer<'_> {
    fn column(&self, parts: &[sqlparser::ast::Ident]) -> String {
        let column = parts.last().map(|p| p.value.clone()).unwrap_or_default();
        if parts.len() < 2 {
            return column;
        }
        let q = parts[parts.len() - 2].value.to_lowercase();
        for (map, n) in self.scopes.borrow().iter().rev() {
            if let Some(t) = map.get(&q) {
                return if *n > 1 { format!("{t}.{column}") } else { column };
            }
        }
        format!("{}.{column}", parts[parts.len() - 2].value)
    }

    fn placeholder(&self, p: &str) -> String {
        let i: usize = p.trim_start_matches('?').parse().unwrap_or(0);
        match i.checked_sub(1).and_then(|i| self.names.get(i)) {
            Some(n) => format!("{{{n}}}"),
            None => p.to_string(),
        }
    }

    fn function(&self, f: &sqlparser::ast::Function) -> String {
        let name = f.name.to_string().to_lowercase();
        let (distinct, args): (bool, Vec<String>) = match &f.args {
            FunctionArguments::List(l) => (
                matches!(
                    l.duplicate_treatment,
                    Some(sqlparser::ast::DuplicateTreatment::Distinct)
                ),
                l.args
                    .iter()
                    .map(|a| match a {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => self.expr(e),
                        FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => "*".into(),
                        other => other.to_string(),
                    })
                    .collect(),
            ),
            other => (false, vec![other.to_string()]),
        };
        let arg = args.join(", ");
        let d = if distinct { "distinct " } else { "" };
        match (name.as_str(), arg.as_str()) {
            ("count", "*") => "the number of rows".into(),
            ("count", _) => format!("the number of {d}{arg} values"),
            ("avg", _) => format!("the average {d}{arg}"),
            ("sum", _) => format!("the total {d}{arg}"),
            ("min", _) => format!("the smallest {arg}"),
            ("max", _) => format!("the largest {arg}"),
            _ => format!("{name}({d}{arg})"),
        }
    }

    /// A value or expression.
    fn expr(&self, e: &Expr) -> String {
        match e {
            Expr::Identifier(id) => id.value.clone(),
            Expr::CompoundIdentifier(parts) => self.column(parts),
            Expr::Value(v) => match &v.value {
                Value::Placeholder(p) => self.placeholder(p),
                other => other.to_string(),
            },
            Expr::Function(f) => self.function(f),
            Expr::Nested(x) => self.expr(x),
            Expr::Subquery(q) => format!("({})", self.query(q)),
            Expr::BinaryOp { op, .. } if operator_words(op).is_some() || is_logic(op) => self.condition(e),
            Expr::BinaryOp { left, op, right } => format!("{} {op} {}", self.expr(left), self.expr(right)),
            Expr::Cast { expr, data_type, .. } => format!("{} as {data_type}", self.expr(expr)),
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr,
            } => format!("-{}", self.expr(expr)),
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                let mut s = String::from("case");
                if let Some(o) = operand {
                    s.push_str(&format!(" of {}", self.expr(o)));
                }
                for c in conditions {
                    s.push_str(&format!(
                        ": when {} then {}",
                        self.condition(&c.condition),
                        self.expr(&c.result)
                    ));
                }
                if let Some(x) = else_result {
                    s.push_str(&format!(", else {}", self.expr(x)));
                }
                s.push_str(" end");
                s
            }
            other => format!("`{other}`"),
        }
    }

    /// A condition.
    fn condition(&self, e: &Expr) -> String {
        match e {
            Expr::Nested(x) => match x.as_ref() {
                Expr::BinaryOp {
                    op: BinaryOperator::Or, ..
                } => {
                    let inner = self.condition(x);
                    if inner.starts_with("optionally") {
                        inner
                    } else {
                        format!("({inner})")
                    }
                }
                _ => self.condition(x),
            },
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => format!("{} and {}", self.condition(left), self.condition(right)),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Or,
                right,
            } => {
                // The optional filter of an exposure: `?1 IS NULL OR col = ?1`.
                if let (
                    Expr::IsNull(p),
                    Expr::BinaryOp {
                        left: col,
                        op: BinaryOperator::Eq,
                        ..
                    },
                ) = (left.as_ref(), right.as_ref())
                {
                    if matches!(p.as_ref(), Expr::Value(_)) {
                        return format!("optionally only those whose {} equals {}", self.expr(col), self.expr(p));
                    }
                }
                format!("either {} or {}", self.condition(left), self.condition(right))
            }
            Expr::BinaryOp { left, op, right } => match operator_words(op) {
                Some(_) if matches!(left.as_ref(), Expr::Value(_)) && !matches!(right.as_ref(), Expr::Value(_)) => {
                    let op = flipped(op);
                    format!(
                        "{} {} {}",
                        self.expr(right),
                        operator_words(&op).unwrap_or("?"),
                        self.expr(left)
                    )
                }
                Some(w) => format!("{} {w} {}", self.expr(left), self.expr(right)),
                None => format!("{} {op} {}", self.expr(left), self.expr(right)),
            },
            Expr::Like {
                negated, expr, pattern, ..
            }
            | Expr::ILike {
                negated, expr, pattern, ..
            } => format!(
                "{} {} the LIKE pattern {}",
                self.expr(expr),
                if *negated { "does not match" } else { "matches" },
                self.expr(pattern)
            ),
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => format!(
                "{} is {}between {} and {} (inclusive)",
                self.expr(expr),
                if *negated { "not " } else { "" },
                self.expr(low),
                self.expr(high)
            ),
            Expr::InList { expr, list, negated } => format!(
                "{} is {}one of {}",
                self.expr(expr),
                if *negated { "not " } else { "" },
                list.iter().map(|x| self.expr(x)).collect::<Vec<_>>().join(", ")
            ),
            Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => format!(
                "{} is {}among ({})",
                self.expr(expr),
                if *negated { "not " } else { "" },
                self.query(subquery)
            ),
            Expr::Exists { subquery, negated } => format!(
                "there {} ({})",
                if *negated { "is no row of" } else { "is a row of" },
                self.query(subquery)
            ),
            Expr::IsNull(x) => format!("{} is missing (NULL)", self.expr(x)),
            Expr::IsNotNull(x) => format!("{} is present (not NULL)", self.expr(x)),
            Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr,
            } => format!("not ({})", self.condition(expr)),
            other => self.expr(other),
        }
    }

    fn select(&self, s: &Select) -> String {
        let mut map = BTreeMap::new();
        let mut tables: Vec<(String, Option<String>)> = Vec::new();
        for twj in &s.from {
            for f in std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation)) {
                if let Some(t) = table_name(f) {
                    tables.push(t);
                }
            }
        }
        // A table read twice (self-join) is named with its alias: `airports T3`.
        let repeated = |t: &str| tables.iter().filter(|(u, _)| u.eq_ignore_ascii_case(t)).count() > 1;
        for (t, a) in &tables {
            let shown = match a {
                Some(a) if repeated(t) => format!("{t} {a}"),
                _ => t.clone(),
            };
            if let Some(a) = a {
                map.insert(a.to_lowercase(), shown.clone());
            }
            map.entry(t.to_lowercase()).or_insert(shown);
        }
        let shown_of = |f: &TableFactor| {
            table_name(f).map(|(t, a)| match a {
                Some(a) if repeated(&t) => format!("{t} {a}"),
                _ => t,
            })
        };
        let n = tables.len().max(s.from.iter().map(|t| 1 + t.joins.len()).sum());
        self.scopes.borrow_mut().push((map, n));
        let items: Vec<String> = s
            .projection
            .iter()
            .map(|i| match i {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => self.expr(e),
                _ => "all columns".into(),
            })
            .collect();
        let mut out = String::new();
        if s.distinct.is_some() {
            out.push_str("the distinct ");
        }
        out.push_str(&items.join(", "));
        let mut from = Vec::new();
        for twj in &s.from {
            let mut f = match &twj.relation {
                TableFactor::Derived { subquery, .. } => format!("({})", self.query(subquery)),
                other => shown_of(other).unwrap_or_else(|| other.to_string()),
            };
            for j in &twj.joins {
                let other = match &j.relation {
                    TableFactor::Derived { subquery, .. } => format!("({})", self.query(subquery)),
                    r => shown_of(r).unwrap_or_else(|| r.to_string()),
                };
                let (kind, constraint) = match &j.join_operator {
                    JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => ("left-joined with", Some(c)),
                    JoinOperator::Join(c) | JoinOperator::Inner(c) => ("joined with", Some(c)),
                    JoinOperator::CrossJoin(c) => ("crossed with", Some(c)),
                    _ => ("joined with", None),
                };
                f.push_str(&format!(" {kind} {other}"));
                if let Some(JoinConstraint::On(on)) = constraint {
                    f.push_str(&format!(" on {}", self.condition(on)));
                }
            }
            from.push(f);
        }
        if !from.is_empty() {
            out.push_str(&format!(" of {}", from.join(", ")));
        }
        if let Some(w) = &s.selection {
            out.push_str(&format!(" where {}", self.condition(w)));
        }
        if let GroupByExpr::Expressions(keys, _) = &s.group_by {
            if !keys.is_empty() {
                let k: Vec<String> = keys.iter().map(|k| self.expr(k)).collect();
                out.push_str(&format!(", per {}", k.join(" and ")));
            }
        }
        if let Some(h) = &s.having {
            out.push_str(&format!(", keeping only groups where {}", self.condition(h)));
        }
        self.scopes.borrow_mut().pop();
        out
    }

    fn set_expr(&self, s: &SetExpr) -> String {
        match s {
            SetExpr::Select(s) => self.select(s),
            SetExpr::Query(q) => self.query(q),
            SetExpr::SetOperation {
                op,
                left,
                right,
                set_quantifier,
            } => {
                let (l, r) = (self.set_expr(left), self.set_expr(right));
                let all = matches!(set_quantifier, SetQuantifier::All);
                match op {
                    SetOperator::Union if all => format!("{l}, followed by {r} (duplicates kept)"),
                    SetOperator::Union => format!("the rows of either {l} or {r}"),
                    SetOperator::Intersect => format!("the rows of both {l} and {r}"),
                    SetOperator::Except | SetOperator::Minus => format!("{l}, except the rows of {r}"),
                }
            }
            other => format!("`{other}`"),
        }
    }

    fn query(&self, q: &Query) -> String {
        let mut out = self.set_expr(&q.body);
        if let Some(OrderByKind::Expressions(keys)) = q.order_by.as_ref().map(|o| &o.kind) {
            let mut parts = Vec::new();
            let mut skip_desc_twin = false;
            for k in keys {
                // The `sort_order` exposure: CASE WHEN ?N = 'asc' THEN key END ASC, … 'desc' … DESC.
                if let Expr::Case { conditions, .. } = &k.expr {
                    if let Some(c) = conditions.first() {
                        if let Expr::BinaryOp { left, right, .. } = &c.condition {
                            if let (Expr::Value(p), Expr::Value(dir)) = (left.as_ref(), right.as_ref()) {
                                if skip_desc_twin {
                                    skip_desc_twin = false;
                                    continue;
                                }
                                if dir.value.to_string() == "'asc'" {
                                    skip_desc_twin = true;
                                    parts.push(format!(
                                        "{} in the {} direction",
                                        self.expr(&c.result),
                                        self.placeholder(&p.value.to_string())
                                    ));
                                    continue;
                                }
                            }
                        }
                    }
                }
                let dir = if k.options.asc == Some(false) {
                    " descending"
                } else {
                    " ascending"
                };
                parts.push(format!("{}{dir}", self.expr(&k.expr)));
            }
            out.push_str(&format!(", sorted by {}", parts.join(", then ")));
        }
        if let Some(LimitClause::LimitOffset { limit, offset, .. }) = &q.limit_clause {
            if let Some(l) = limit {
                out.push_str(&format!(", the first {} rows", self.expr(l)));
            }
            if let Some(o) = offset {
                out.push_str(&format!(" after skipping {}", self.expr(&o.value)));
            }
        }
        out
    }
}

fn is_logic(op: &BinaryOperator) -> bool {
    matches!(op, BinaryOperator::And | BinaryOperator::Or)
}

/// The summary of a parameterised query: "Returns …." (module docs); `names[i]` names placeholder
/// `?{i + 1}`.
pub fn summary(q: &Query, names: &[String]) -> String {
    let d = Describer {
        names,
        scopes: Default::default(),
    };
    let body = d.query(q);
    format!("Returns {body}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(sql: &str, names: &[&str]) -> String {
        let Ok(sqlparser::ast::Statement::Query(q)) = crate::sql::parse(sql) else {
            panic!("{sql}")
        };
        summary(&q, &names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn summaries_say_what_the_query_computes() {
        assert_eq!(
            s(
                "SELECT T1.model FROM car_names AS T1 JOIN cars_data AS T2 ON T1.MakeId = T2.Id WHERE T2.Weight < (SELECT avg(Weight) FROM cars_data)",
                &[]
            ),
            "Returns car_names.model of car_names joined with cars_data on car_names.MakeId equals cars_data.Id where cars_data.Weight is less than (the average Weight of cars_data)."
        );
        assert_eq!(
            s(
                "SELECT count(DISTINCT GovernmentForm) FROM country WHERE Continent = ?1 OR ?2 < Population",
                &["continent", "min_population"]
            ),
            "Returns the number of distinct GovernmentForm values of country where either Continent equals {continent} or Population is greater than {min_population}."
        );
        assert_eq!(
            s(
                "SELECT name FROM singer ORDER BY CASE WHEN ?1 = 'asc' THEN age END ASC, CASE WHEN ?1 = 'desc' THEN age END DESC LIMIT 3",
                &["sort_order"]
            ),
            "Returns name of singer, sorted by age in the {sort_order} direction, the first 3 rows."
        );
    }
}
