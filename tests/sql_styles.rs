//! Quoting styles as a regression corpus (issue 27): Spider dev's gold SQL rewritten with every
//! identifier (tables, columns, aliases) quoted in backticks, `[brackets]` or double quotes, or
//! upper-cased, must give the same kept rows (ids aside: input, output calls, gold answer,
//! setup steps, tools), the same REST endpoints and the same names as the original corpus, for
//! `slot`, `sel` and `rest`.
//!
//! The rewriter is sqlparser's own: each gold query is parsed, every identifier's
//! `quote_style` set by a [`VisitorMut`], and the statement printed. An identifier that is
//! already quoted (Spider's double-quoted string literals, which SQLite reads as text when no
//! column has that name) is left as written. The rewritten corpus is a copy of `dev.json` with
//! `query` replaced, its databases linked, built by the same recipes in a temporary tree.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sqlparser::ast::{
    BinaryOperator, Expr, Ident, JoinConstraint, ObjectName, ObjectNamePart, Query, SelectItem, SetExpr, TableFactor,
    UnaryOperator, VisitMut, VisitorMut,
};

mod corpus_support;

use corpus_support::spider_corpus as corpus;

/// How identifiers are rewritten.
#[derive(Clone, Copy, Debug)]
enum Style {
    /// Quoted with this character (`` ` ``, `[`, `"`).
    Quoted(char),
    /// Unquoted, upper-cased (table and column references; aliases keep their spelling).
    Upper,
    /// Identifiers as written; negations re-spelled: `x NOT IN (…)` → `NOT x IN (…)`, `x NOT
    /// LIKE p` → `NOT x LIKE p`, `x BETWEEN a AND b` → `NOT x NOT BETWEEN a AND b`, a WHERE
    /// `p AND q` → `NOT (NOT (p) OR NOT (q))` (De Morgan). Same meaning, other text.
    Negated,
}

struct Requote(Style);

impl Requote {
    /// Rewrites an identifier the query wrote unquoted; `reference` is false for an alias
    /// definition (kept as spelled under [`Style::Upper`]).
    fn ident(&self, id: &mut Ident, reference: bool) {
        if id.quote_style.is_some() {
            return;
        }
        match self.0 {
            Style::Quoted(q) => id.quote_style = Some(q),
            Style::Upper if reference => id.value = id.value.to_uppercase(),
            Style::Upper | Style::Negated => {}
        }
    }

    fn set_expr(&self, body: &mut SetExpr) {
        match body {
            SetExpr::Select(s) if matches!(self.0, Style::Negated) => {
                if let Some(Expr::BinaryOp {
                    left,
                    op: BinaryOperator::And,
                    right,
                }) = &s.selection
                {
                    let not = |e: &Expr| Expr::UnaryOp {
                        op: UnaryOperator::Not,
                        expr: Box::new(Expr::Nested(Box::new(e.clone()))),
                    };
                    s.selection = Some(Expr::UnaryOp {
                        op: UnaryOperator::Not,
                        expr: Box::new(Expr::Nested(Box::new(Expr::BinaryOp {
                            left: Box::new(not(left)),
                            op: BinaryOperator::Or,
                            right: Box::new(not(right)),
                        }))),
                    });
                }
            }
            SetExpr::Select(s) => {
                for item in &mut s.projection {
                    if let SelectItem::ExprWithAlias { alias, .. } = item {
                        self.ident(alias, false);
                    }
                }
                for t in &mut s.from {
                    for j in &mut t.joins {
                        let c = match &mut j.join_operator {
                            sqlparser::ast::JoinOperator::Join(c)
                            | sqlparser::ast::JoinOperator::Inner(c)
                            | sqlparser::ast::JoinOperator::Left(c)
                            | sqlparser::ast::JoinOperator::LeftOuter(c) => c,
                            _ => continue,
                        };
                        if let JoinConstraint::Using(cols) = c {
                            for col in cols {
                                self.name(col);
                            }
                        }
                    }
                }
            }
            SetExpr::SetOperation { left, right, .. } => {
                self.set_expr(left);
                self.set_expr(right);
            }
            SetExpr::Query(q) => self.set_expr(&mut q.body),
            _ => {}
        }
    }

    fn name(&self, name: &mut ObjectName) {
        for part in &mut name.0 {
            if let ObjectNamePart::Identifier(id) = part {
                self.ident(id, true);
            }
        }
    }
}

impl VisitorMut for Requote {
    type Break = ();

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        self.set_expr(&mut q.body);
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, name: &mut ObjectName) -> ControlFlow<()> {
        self.name(name);
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, t: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } = t {
            self.ident(&mut a.name, false);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if !matches!(self.0, Style::Negated) {
            return ControlFlow::Continue(());
        }
        let not = |inner: Expr| Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr: Box::new(inner),
        };
        match e {
            Expr::InSubquery { negated, .. }
            | Expr::InList { negated, .. }
            | Expr::Like { negated, .. }
            | Expr::Between { negated, .. } => {
                // `x BETWEEN …` becomes `NOT x NOT BETWEEN …`; the negated forms `NOT x IN …`.
                *negated = !*negated;
                *e = not(e.clone());
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        match e {
            Expr::Identifier(id) => self.ident(id, true),
            Expr::CompoundIdentifier(ids) => {
                for id in ids {
                    self.ident(id, true);
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// `sql` with its identifiers rewritten in `style`; the text as is when it does not parse.
fn rewrite(sql: &str, style: Style) -> String {
    let Ok(mut stmt) = toolforge::sql::parse(sql) else {
        return sql.to_string();
    };
    let _ = stmt.visit(&mut Requote(style));
    stmt.to_string()
}

/// A temporary project tree whose `spider-dev` source is Spider dev with every gold query
/// rewritten (`None`: as is), holding the recipe `name`; returns the recipe path.
fn tree(tmp: &Path, recipe: &str, style: Option<Style>) -> PathBuf {
    let data = tmp.join("corpus");
    if !data.exists() {
        std::fs::create_dir_all(&data).unwrap();
        let mut questions: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(corpus().join("dev.json")).unwrap()).unwrap();
        if let Some(style) = style {
            for q in &mut questions {
                let sql = q["query"].as_str().unwrap().to_string();
                q["query"] = Value::String(rewrite(&sql, style));
            }
        }
        std::fs::write(data.join("dev.json"), serde_json::to_string(&questions).unwrap()).unwrap();
        std::fs::copy(corpus().join("tables.json"), data.join("tables.json")).unwrap();
        std::os::unix::fs::symlink(corpus().join("database").canonicalize().unwrap(), data.join("database")).unwrap();
        corpus_support::use_spider_corpus(tmp, &data);
    }
    corpus_support::recipe(tmp, recipe)
}

/// What a build gives, ids and the gold SQL's spelling aside: the kept rows by id, the REST
/// endpoints (their SQL re-spelled in `style`, so only the quoting may differ) and the count
/// kept.
struct Built {
    rows: BTreeMap<String, Value>,
    endpoints: Vec<Value>,
    attempted: u64,
}

fn build(tmp: &Path, recipe: &str, style: Option<Style>) -> Built {
    let path = tree(tmp, recipe, style);
    let out = tmp.join("out");
    toolforge::pipeline::build_and_emit(&path, Some(&out), Some(&tmp.join(format!("store-{recipe}"))), false).unwrap();
    let dir = out.join(recipe);
    let mut rows = BTreeMap::new();
    for line in std::fs::read_to_string(dir.join("data/dev.jsonl")).unwrap().lines() {
        let mut row: Value = serde_json::from_str(line).unwrap();
        let id = row["id"].as_str().unwrap().to_string();
        row.as_object_mut().unwrap().remove("sql");
        rows.insert(id, row);
    }
    let endpoints = match std::fs::read_to_string(dir.join("tools/endpoints.json")) {
        Ok(text) => serde_json::from_str(&text).unwrap(),
        Err(_) => vec![],
    };
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report/verification.json")).unwrap()).unwrap();
    Built {
        rows,
        endpoints,
        attempted: report["attempted"].as_u64().unwrap(),
    }
}

/// The endpoints with their SQL re-spelled in `style` (a no-op on SQL already in it).
fn respelled(endpoints: &[Value], style: Style) -> Vec<Value> {
    endpoints
        .iter()
        .map(|e| {
            let mut e = e.clone();
            let sql = e["sql"].as_str().unwrap_or_default().to_string();
            e["sql"] = Value::String(rewrite(&sql, style));
            e
        })
        .collect()
}

/// The two values' texts around their first differing character.
fn around_first_difference(a: &Value, b: &Value) -> String {
    let (a, b) = (a.to_string(), b.to_string());
    let at = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let window = |s: &str| s.chars().skip(at.saturating_sub(120)).take(240).collect::<String>();
    format!("\n  {}\n  {}", window(&a), window(&b))
}

/// Compares one format's build on the rewritten corpus with the original; returns the
/// differences (row ids and endpoint names) for the message.
fn compare(recipe: &str, style: Style, original: &Built, tmp: &Path) -> Vec<String> {
    let tag = match style {
        Style::Quoted('`') => "backtick",
        Style::Quoted('[') => "bracket",
        Style::Quoted(_) => "double",
        Style::Upper => "upper",
        Style::Negated => "negated",
    };
    let styled = build(&tmp.join(tag), recipe, Some(style));
    eprintln!(
        "{recipe} {style:?}: kept {} (original {}) of {}",
        styled.rows.len(),
        original.rows.len(),
        styled.attempted
    );
    let mut diffs = Vec::new();
    // Upper-cased names are the same names to SQLite; descriptions quote them as written.
    let cased = |v: &Value| match style {
        Style::Upper => serde_json::from_str(&v.to_string().to_lowercase()).unwrap(),
        _ => v.clone(),
    };
    for (id, row) in &original.rows {
        let row = &cased(row);
        match styled.rows.get(id).map(cased).as_ref() {
            None => diffs.push(format!("{recipe} {style:?}: {id} dropped")),
            Some(r) if r != row => {
                let fields: Vec<&String> = row
                    .as_object()
                    .unwrap()
                    .iter()
                    .filter(|(k, v)| r.get(k.as_str()) != Some(v))
                    .map(|(k, _)| k)
                    .collect();
                let first = fields
                    .first()
                    .map(|k| around_first_difference(&row[k.as_str()], &r[k.as_str()]));
                diffs.push(format!(
                    "{recipe} {style:?}: {id} differs in {fields:?}{}",
                    first.unwrap_or_default()
                ));
            }
            _ => {}
        }
    }
    for id in styled.rows.keys().filter(|id| !original.rows.contains_key(*id)) {
        diffs.push(format!("{recipe} {style:?}: {id} kept only when re-spelled"));
    }
    let respelled = |e: &[Value]| respelled(e, style).iter().map(cased).collect::<Vec<Value>>();
    let (a, b) = (respelled(&original.endpoints), respelled(&styled.endpoints));
    if a != b {
        let first = a
            .iter()
            .zip(&b)
            .find(|(x, y)| x != y)
            .map(|(x, y)| around_first_difference(x, y));
        diffs.push(format!(
            "{recipe} {style:?}: endpoints differ ({} vs {}){}",
            a.len(),
            b.len(),
            first.unwrap_or_default()
        ));
    }
    eprintln!("{recipe} {style:?}: {} differences", diffs.len());
    diffs
}

/// Spider dev with every identifier backtick-quoted, bracketed, double-quoted or upper-cased
/// gives the original's kept rows, endpoints and names for slot, sel and rest.
#[test]
fn spider_dev_in_every_quoting_style_keeps_the_same_rows_endpoints_and_names() {
    let tmp = tempfile::tempdir().unwrap();
    let mut diffs = Vec::new();
    for recipe in ["slot-spider", "sel-spider", "rest-spider"] {
        let original = build(&tmp.path().join("original"), recipe, None);
        for style in [Style::Quoted('`'), Style::Quoted('['), Style::Quoted('"'), Style::Upper] {
            diffs.extend(compare(recipe, style, &original, tmp.path()));
        }
        // Negations re-spelled: the same SLOT/SEL rows (REST endpoints follow the SQL's text,
        // so only the kept count is printed).
        let negated = compare(recipe, Style::Negated, &original, tmp.path());
        if recipe != "rest-spider" {
            diffs.extend(negated);
        }
    }
    let shown: Vec<&String> = diffs.iter().take(12).collect();
    assert!(diffs.is_empty(), "{} differences, first: {shown:#?}", diffs.len());
}

/// The rewriter itself: every identifier quoted, string literals (and SQLite's double-quoted
/// ones) left alone.
#[test]
fn rewriter_quotes_every_identifier_and_no_literal() {
    let sql = "SELECT T1.name AS n, count(*) FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.sid \
               WHERE T2.year = \"2014\" AND T1.country = 'France' GROUP BY T1.name ORDER BY n";
    assert_eq!(
        rewrite(sql, Style::Quoted('`')),
        "SELECT `T1`.`name` AS `n`, count(*) FROM `singer` AS `T1` JOIN `concert` AS `T2` ON `T1`.`id` = `T2`.`sid` \
         WHERE `T2`.`year` = \"2014\" AND `T1`.`country` = 'France' GROUP BY `T1`.`name` ORDER BY `n`"
    );
    assert_eq!(
        rewrite(sql, Style::Upper),
        "SELECT T1.NAME AS n, count(*) FROM SINGER AS T1 JOIN CONCERT AS T2 ON T1.ID = T2.SID \
         WHERE T2.YEAR = \"2014\" AND T1.COUNTRY = 'France' GROUP BY T1.NAME ORDER BY N"
    );
}
