//! The SQLite dialect every gold query is parsed with: sqlparser's [`SQLiteDialect`], except that
//! an incomplete `x MATCH …` / `x REGEXP …` is a parse error instead of a panic. sqlparser 0.59's
//! `SQLiteDialect::parse_infix` unwraps the right operand's parse result
//! (`dialect/sqlite.rs:91`; fixed upstream in apache/datafusion-sqlparser-rs#2197), so
//! `SELECT min(@ROM match@@@@@NCT LAN) FROM matche` — found by `fuzz/` (`sql_lowering`) — aborted
//! the process. The wrapper reports itself as [`SQLiteDialect`] (`Dialect::dialect`), so every
//! dialect check inside the parser behaves as for SQLite; drop it when sqlparser is upgraded.

use std::any::TypeId;

use sqlparser::ast::{BinaryOperator, Expr, Statement};
use sqlparser::dialect::{Dialect, SQLiteDialect};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};

/// [`SQLiteDialect`] with `MATCH`/`REGEXP` infix parse errors returned, not unwrapped.
#[derive(Debug)]
pub struct Sqlite(SQLiteDialect);

impl Sqlite {
    /// The dialect.
    pub fn new() -> Sqlite {
        Sqlite(SQLiteDialect {})
    }
}

impl Default for Sqlite {
    fn default() -> Sqlite {
        Sqlite::new()
    }
}

impl Dialect for Sqlite {
    fn dialect(&self) -> TypeId {
        TypeId::of::<SQLiteDialect>()
    }
    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.0.is_delimited_identifier_start(ch)
    }
    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        self.0.identifier_quote_style(identifier)
    }
    fn is_identifier_start(&self, ch: char) -> bool {
        self.0.is_identifier_start(ch)
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        self.0.is_identifier_part(ch)
    }
    fn supports_filter_during_aggregation(&self) -> bool {
        self.0.supports_filter_during_aggregation()
    }
    fn supports_start_transaction_modifier(&self) -> bool {
        self.0.supports_start_transaction_modifier()
    }
    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        self.0.parse_statement(parser)
    }
    fn parse_infix(&self, parser: &mut Parser, expr: &Expr, _precedence: u8) -> Option<Result<Expr, ParserError>> {
        for (keyword, op) in [
            (Keyword::REGEXP, BinaryOperator::Regexp),
            (Keyword::MATCH, BinaryOperator::Match),
        ] {
            if parser.parse_keyword(keyword) {
                return Some(parser.parse_expr().map(|right| Expr::BinaryOp {
                    left: Box::new(expr.clone()),
                    op,
                    right: Box::new(right),
                }));
            }
        }
        None
    }
    fn supports_in_empty_list(&self) -> bool {
        self.0.supports_in_empty_list()
    }
    fn supports_limit_comma(&self) -> bool {
        self.0.supports_limit_comma()
    }
    fn supports_asc_desc_in_column_definition(&self) -> bool {
        self.0.supports_asc_desc_in_column_definition()
    }
    fn supports_dollar_placeholder(&self) -> bool {
        self.0.supports_dollar_placeholder()
    }
    fn supports_notnull_operator(&self) -> bool {
        self.0.supports_notnull_operator()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `fuzz/` finding: an incomplete MATCH/REGEXP right operand is an error, not a panic.
    #[test]
    fn incomplete_match_or_regexp_is_a_parse_error_not_a_panic() {
        for sql in [
            "SELECT min(@ROM match@@@@@NCT LAN) FROM matche",
            "SELECT 1 REGEXP",
            "SELECT 1 MATCH",
        ] {
            assert!(Parser::parse_sql(&Sqlite::new(), sql).is_err(), "{sql}");
        }
        let ok = Parser::parse_sql(&Sqlite::new(), "SELECT a FROM t WHERE a REGEXP 'x' AND b MATCH 'y'").unwrap();
        assert_eq!(
            ok[0].to_string(),
            Parser::parse_sql(&SQLiteDialect {}, "SELECT a FROM t WHERE a REGEXP 'x' AND b MATCH 'y'").unwrap()[0]
                .to_string()
        );
    }
}
