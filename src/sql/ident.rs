//! Identifiers as the parser gives them: the one place every SQL stage (planner, REST
//! parameterisation and exposure, describer, normaliser, endpoint naming) reads a table or column
//! name from the AST.
//!
//! sqlparser already removes an identifier's quotes — SQLite's `"x"`, `` `x` `` and `[x]` all
//! parse to `Ident { value: "x", quote_style: Some(q) }` — so a name is its parts' `value`s,
//! never the printed text trimmed of quote characters. Names are compared as SQLite compares
//! them: ASCII case-insensitively ([`same`]). One exception is SQLite's own: a double-quoted
//! identifier that names no column is read as a string literal ([`may_be_string`]).

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, Ident, JoinConstraint, JoinOperator, ObjectName, Query, SelectItem, SetExpr, TableFactor, VisitMut,
    VisitorMut,
};

/// The parts of an object name as written, without quotes, joined with `.`
/// (`` `main`.[singer] `` → `main.singer`).
pub fn object_name(name: &ObjectName) -> String {
    name.0
        .iter()
        .map(|p| match p.as_ident() {
            Some(id) => id.value.clone(),
            None => p.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The table an object name in `FROM` names: its last part without quotes (`main.singer` →
/// `singer`; SQLite's schema qualifier names the database, not the table).
pub fn table_name(name: &ObjectName) -> String {
    name.0
        .last()
        .map(|p| match p.as_ident() {
            Some(id) => id.value.clone(),
            None => p.to_string(),
        })
        .unwrap_or_default()
}

/// A column reference: `(qualifier, column)` for `c` (no qualifier), `t.c` and `schema.t.c`
/// (qualifier `t`), through parentheses; `None` for any other expression.
pub fn column_ref(e: &Expr) -> Option<(Option<&Ident>, &Ident)> {
    match e {
        Expr::Identifier(id) => Some((None, id)),
        Expr::CompoundIdentifier(ids) if (2..=3).contains(&ids.len()) => {
            Some((Some(&ids[ids.len() - 2]), &ids[ids.len() - 1]))
        }
        Expr::Nested(inner) => column_ref(inner),
        _ => None,
    }
}

/// The column a reference names, without quotes or qualifier (`` T1.`Name` `` → `Name`).
pub fn column_name(e: &Expr) -> Option<&str> {
    column_ref(e).map(|(_, c)| c.value.as_str())
}

/// Whether two names are the same identifier in SQLite (ASCII case-insensitive).
pub fn same(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Whether a bare identifier may be SQLite's double-quoted string literal (`WHERE name =
/// "John"`): true for a double-quoted one, which SQLite reads as text when no column has its
/// name; the caller decides with the schema. Backticks and brackets always quote identifiers.
pub fn may_be_string(id: &Ident) -> bool {
    id.quote_style == Some('"')
}

/// Removes the quotes of every identifier of `q` (tables, columns, aliases, `USING` columns, in
/// nested queries too) except a bare double-quoted one, which may be a string
/// ([`may_be_string`]): the spelling-free form two queries that differ only in quoting share
/// (used by [`crate::sql::normalise::key`]; the text may no longer parse when a name holds a
/// space).
pub fn unquote(q: &mut Query) {
    let _ = q.visit(&mut Unquote { strings_too: false });
}

/// The text of `e` as a person reads it in a description: every identifier without its quotes,
/// double-quoted ones too (`` `T1`.`age` `` → `T1.age`).
pub fn plain_text(e: &Expr) -> String {
    let mut e = e.clone();
    let _ = e.visit(&mut Unquote { strings_too: true });
    e.to_string()
}

/// Removes identifier quotes; `strings_too` also from a bare double-quoted identifier.
struct Unquote {
    strings_too: bool,
}

fn unquote_name(name: &mut ObjectName) {
    for part in &mut name.0 {
        if let sqlparser::ast::ObjectNamePart::Identifier(id) = part {
            id.quote_style = None;
        }
    }
}

fn unquote_body(body: &mut SetExpr) {
    match body {
        SetExpr::Select(s) => {
            for item in &mut s.projection {
                if let SelectItem::ExprWithAlias { alias, .. } = item {
                    alias.quote_style = None;
                }
            }
            for join in s.from.iter_mut().flat_map(|t| t.joins.iter_mut()) {
                if let JoinOperator::Join(JoinConstraint::Using(cols))
                | JoinOperator::Inner(JoinConstraint::Using(cols))
                | JoinOperator::Left(JoinConstraint::Using(cols))
                | JoinOperator::LeftOuter(JoinConstraint::Using(cols)) = &mut join.join_operator
                {
                    cols.iter_mut().for_each(unquote_name);
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            unquote_body(left);
            unquote_body(right);
        }
        SetExpr::Query(q) => unquote_body(&mut q.body),
        _ => {}
    }
}

impl VisitorMut for Unquote {
    type Break = ();

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        unquote_body(&mut q.body);
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, name: &mut ObjectName) -> ControlFlow<()> {
        unquote_name(name);
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, t: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } = t {
            a.name.quote_style = None;
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        match e {
            Expr::Identifier(id) if self.strings_too || !may_be_string(id) => id.quote_style = None,
            Expr::CompoundIdentifier(ids) => ids.iter_mut().for_each(|id| id.quote_style = None),
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::{SetExpr, Statement, TableFactor};

    fn select(sql: &str) -> Box<sqlparser::ast::Select> {
        let Ok(Statement::Query(q)) = crate::sql::parse(sql) else {
            panic!("{sql}")
        };
        let SetExpr::Select(s) = *q.body else { panic!("{sql}") };
        s
    }

    /// Every quoting SQLite accepts gives the same table and column names.
    #[test]
    fn every_sqlite_quoting_gives_the_same_names() {
        for sql in [
            "SELECT T1.Name FROM main.singer AS T1",
            "SELECT `T1`.`Name` FROM `main`.`singer` AS `T1`",
            "SELECT [T1].[Name] FROM [main].[singer] AS [T1]",
            "SELECT \"T1\".\"Name\" FROM \"main\".\"singer\" AS \"T1\"",
        ] {
            let s = select(sql);
            let TableFactor::Table { name, .. } = &s.from[0].relation else {
                panic!()
            };
            assert_eq!(object_name(name), "main.singer", "{sql}");
            assert_eq!(table_name(name), "singer", "{sql}");
            let sqlparser::ast::SelectItem::UnnamedExpr(e) = &s.projection[0] else {
                panic!()
            };
            let (q, c) = column_ref(e).unwrap();
            assert_eq!((q.unwrap().value.as_str(), c.value.as_str()), ("T1", "Name"), "{sql}");
            assert!(same(&c.value, "NAME"));
        }
    }

    /// Unquoting gives the unquoted spelling back, and leaves SQLite's double-quoted strings.
    #[test]
    fn unquote_gives_the_unquoted_spelling_and_keeps_double_quoted_strings() {
        let plain = "SELECT T1.name AS n FROM singer AS T1 JOIN song USING(sid) WHERE T1.x = \"a\" ORDER BY n";
        for sql in [
            plain,
            "SELECT `T1`.`name` AS `n` FROM `singer` AS `T1` JOIN `song` USING (`sid`) WHERE [T1].[x] = \"a\" ORDER BY [n]",
        ] {
            let Ok(sqlparser::ast::Statement::Query(mut q)) = crate::sql::parse(sql) else {
                panic!("{sql}")
            };
            unquote(&mut q);
            assert_eq!(q.to_string(), plain);
            let SetExpr::Select(s) = *q.body else { panic!() };
            assert_eq!(plain_text(s.selection.as_ref().unwrap()), "T1.x = a");
        }
    }
}
