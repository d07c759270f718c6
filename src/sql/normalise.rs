//! The normal form of a parameterised query: the identity two REST endpoints share (issue 12 §3).
//!
//! Two gold queries that mean the same thing after their literals became parameters
//! ([`crate::sql::rest`]) get the same key, so one endpoint serves every question with that
//! meaning. The key is sqlparser's rendering of a rewritten copy of the query, lower-cased outside
//! quoted strings (SQLite keywords and identifiers are case-insensitive), where:
//!
//! - table aliases are resolved to their table (`T1.name` → `singer.name`; a lone table's columns
//!   lose the qualifier) and dropped from `FROM`, scope by scope (a subquery's aliases are its
//!   own); a scope that names one table twice (a self-join) keeps its aliases;
//! - identifiers lose their quotes (`` `singer` ``, `[singer]` and `singer` are one name;
//!   [`crate::sql::ident::unquote`]), except a bare double-quoted one, which may be a string;
//! - `JOIN` and `INNER JOIN` are one operator;
//! - a comparison with the parameter on the left is turned round (`?1 < age` → `age > ?1`), and
//!   the two sides of `=` / `<>` between columns are put in text order (`a.x = b.y` ≡ `b.y = a.x`);
//! - the operands of an `AND` chain (and of an `OR` chain) are sorted, redundant parentheses around
//!   a single name or value dropped;
//! - each placeholder `?N` is replaced by its parameter's name and type, so the order in which the
//!   literals appeared does not matter (the gold call passes arguments by name).
//!
//! A key collision between queries of different meaning can only merge two questions whose SQL
//! the build then runs with each question's own arguments: the merge is kept only when it
//! reproduces every merged question's gold result ([`crate::sql::compile`]).

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, Ident, JoinOperator, Query, SetExpr, TableFactor, Value, VisitMut, VisitorMut,
};

/// One alias scope: alias (lower case) → table (lower case); `None` when aliases are kept.
type Scope = Option<BTreeMap<String, String>>;

struct Normaliser<'a> {
    scopes: Vec<(Scope, usize)>,
    /// `(name, kind)` of placeholder `?N` at index `N - 1`.
    parameters: &'a [(String, String)],
}

/// What one query body's `FROM` clauses name: alias → table, and whether a table repeats.
#[derive(Default)]
struct Tables {
    map: BTreeMap<String, String>,
    self_join: bool,
    per_select_max: usize,
}

/// Walks the `SELECT`s of a body (not nested queries), recording their tables and aliases and
/// making `JOIN` `INNER JOIN`.
fn collect(body: &mut SetExpr, acc: &mut Tables) {
    match body {
        SetExpr::Select(s) => {
            let mut seen: Vec<String> = Vec::new();
            for twj in &mut s.from {
                for j in &mut twj.joins {
                    if let JoinOperator::Join(c) = &j.join_operator {
                        j.join_operator = JoinOperator::Inner(c.clone());
                    }
                }
                let factors = std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation));
                for f in factors {
                    let TableFactor::Table { name, alias, .. } = f else {
                        acc.self_join = true;
                        continue;
                    };
                    let table = crate::sql::ident::table_name(name).to_lowercase();
                    acc.self_join |= seen.contains(&table);
                    seen.push(table.clone());
                    if let Some(a) = alias {
                        acc.map.insert(a.name.value.to_lowercase(), table.clone());
                    }
                    acc.map.insert(table.clone(), table);
                }
            }
            acc.per_select_max = acc.per_select_max.max(seen.len());
        }
        SetExpr::SetOperation { left, right, .. } => {
            collect(left, acc);
            collect(right, acc);
        }
        _ => {}
    }
}

/// The scope of one query body: its alias map (`None` for a self-join) and its table count.
fn scope_of(body: &mut SetExpr) -> (Scope, usize) {
    let mut t = Tables::default();
    collect(body, &mut t);
    if t.self_join {
        (None, t.per_select_max)
    } else {
        (Some(t.map), t.per_select_max)
    }
}

impl Normaliser<'_> {
    fn resolve(&self, qualifier: &str) -> Option<(String, bool)> {
        for (scope, n) in self.scopes.iter().rev() {
            let Some(map) = scope else { return None };
            if let Some(t) = map.get(qualifier) {
                return Some((t.clone(), *n == 1));
            }
        }
        None
    }
}

fn flip(op: &BinaryOperator) -> Option<BinaryOperator> {
    use BinaryOperator::*;
    Some(match op {
        Lt => Gt,
        Gt => Lt,
        LtEq => GtEq,
        GtEq => LtEq,
        Eq => Eq,
        NotEq => NotEq,
        _ => return None,
    })
}

fn is_value(e: &Expr) -> bool {
    matches!(e, Expr::Value(_))
}

/// The operands of a chain of `op` (through parentheses), left to right.
fn chain(e: Expr, op: &BinaryOperator, out: &mut Vec<Expr>) {
    match e {
        Expr::BinaryOp { left, op: o, right } if &o == op => {
            chain(*left, op, out);
            chain(*right, op, out);
        }
        Expr::Nested(inner) if matches!(inner.as_ref(), Expr::BinaryOp { op: o, .. } if o == op) => {
            chain(*inner, op, out)
        }
        other => out.push(other),
    }
}

impl VisitorMut for Normaliser<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        let scope = scope_of(&mut q.body);
        self.scopes.push(scope);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.scopes.pop();
        ControlFlow::Continue(())
    }

    fn post_visit_table_factor(&mut self, f: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { alias, .. } = f {
            if matches!(self.scopes.last(), Some((Some(_), _))) {
                *alias = None;
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        match e {
            Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
                let q = parts[0].value.to_lowercase();
                if let Some((table, lone)) = self.resolve(&q) {
                    let column = Ident::new(parts[1].value.to_lowercase());
                    *e = if lone {
                        Expr::Identifier(column)
                    } else {
                        Expr::CompoundIdentifier(vec![Ident::new(table), column])
                    };
                }
            }
            Expr::Identifier(id) if id.quote_style.is_none() => id.value = id.value.to_lowercase(),
            Expr::Value(v) => {
                if let Value::Placeholder(p) = &v.value {
                    let i: usize = p.trim_start_matches('?').parse().unwrap_or(0);
                    if let Some((name, kind)) = i.checked_sub(1).and_then(|i| self.parameters.get(i)) {
                        v.value = Value::Placeholder(format!(":{name}:{kind}"));
                    }
                }
            }
            Expr::Nested(inner) if matches!(inner.as_ref(), Expr::Identifier(_) | Expr::Value(_)) => {
                *e = inner.as_ref().clone();
            }
            Expr::BinaryOp { left, op, right } => {
                if matches!(op, BinaryOperator::And | BinaryOperator::Or) {
                    let op = op.clone();
                    let mut items = Vec::new();
                    chain(std::mem::replace(e, Expr::value(Value::Null)), &op, &mut items);
                    items.sort_by_key(|x| x.to_string());
                    let mut it = items.into_iter();
                    let first = it.next().expect("a chain has operands");
                    *e = it.fold(first, |acc, x| Expr::BinaryOp {
                        left: Box::new(acc),
                        op: op.clone(),
                        right: Box::new(x),
                    });
                } else if let Some(flipped) = flip(op) {
                    let swap = (is_value(left) && !is_value(right))
                        || (matches!(op, BinaryOperator::Eq | BinaryOperator::NotEq)
                            && !is_value(left)
                            && !is_value(right)
                            && left.to_string() > right.to_string());
                    if swap {
                        std::mem::swap(left, right);
                        *op = flipped;
                    }
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// The normal-form key of `query` (module docs); `parameters[i]` is the `(name, kind)` of
/// placeholder `?{i + 1}`.
pub fn key(query: &Query, parameters: &[(String, String)]) -> String {
    let mut q = query.clone();
    crate::sql::ident::unquote(&mut q);
    let _ = q.visit(&mut Normaliser {
        scopes: Vec::new(),
        parameters,
    });
    let sql = q.to_string();
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    for ch in sql.chars() {
        if ch == '\'' {
            quoted = !quoted;
        }
        out.push(if quoted { ch } else { ch.to_ascii_lowercase() });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(sql: &str, params: &[(&str, &str)]) -> String {
        let Ok(sqlparser::ast::Statement::Query(q)) = crate::sql::parse(sql) else {
            panic!("{sql}")
        };
        let p: Vec<(String, String)> = params.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        key(&q, &p)
    }

    #[test]
    fn aliases_condition_order_keyword_case_and_comparison_side_do_not_matter() {
        let a = k(
            "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.singer_id WHERE T1.age > ?1 AND T2.year = ?2",
            &[("min_age", "integer"), ("year", "integer")],
        );
        let b = k(
            "select s.NAME from singer as s inner join concert as c on c.singer_id = s.id where c.year = ?1 and ?2 < s.age",
            &[("year", "integer"), ("min_age", "integer")],
        );
        assert_eq!(a, b);
        let single_a = k(
            "SELECT count(*) FROM singer AS T1 WHERE T1.country = ?1",
            &[("country", "string")],
        );
        let single_b = k(
            "SELECT COUNT(*) FROM singer WHERE country = ?1",
            &[("country", "string")],
        );
        assert_eq!(single_a, single_b);
    }

    #[test]
    fn different_meanings_keep_different_keys() {
        let dep = k(
            "SELECT count(*) FROM flights AS T1 JOIN airports AS T2 ON T1.DestAirport = T2.AirportCode WHERE T2.City = ?1",
            &[("city", "string")],
        );
        let arr = k(
            "SELECT count(*) FROM flights AS T1 JOIN airports AS T2 ON T1.SourceAirport = T2.AirportCode WHERE T2.City = ?1",
            &[("city", "string")],
        );
        assert_ne!(dep, arr);
        let gt = k("SELECT name FROM singer WHERE age > ?1", &[("min_age", "integer")]);
        let ge = k("SELECT name FROM singer WHERE age >= ?1", &[("min_age", "integer")]);
        assert_ne!(gt, ge);
        // A self-join keeps its aliases: which side is which matters.
        let s1 = k("SELECT T1.a FROM t AS T1 JOIN t AS T2 ON T1.x = T2.y", &[]);
        let s2 = k("SELECT T2.a FROM t AS T1 JOIN t AS T2 ON T1.x = T2.y", &[]);
        assert_ne!(s1, s2);
    }
}
