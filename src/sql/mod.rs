//! SQL → tool calls: `parse` (sqlparser, SQLite dialect) → [`plan`] (a small linear query-plan
//! IR built against the database schema) → [`slot`] (the SLOT call sequence).
//!
//! Errors say whose fault they are: [`LowerError::Parse`] (the gold SQL does not parse),
//! [`LowerError::Unsupported`] (a construct the tool pool cannot express faithfully; a drop
//! reason, not a bug), [`LowerError::Schema`] (the SQL names a table or column the database
//! lacks).

pub mod compile;
pub mod describe;
pub mod dialect;
pub mod expose;
pub mod extreme;
pub mod gold;
pub mod ident;
pub mod normalise;
pub mod numeric_reading;
pub mod plan;
pub mod rest;
pub mod schema;
pub mod slot;

use sqlparser::ast::Statement;
use sqlparser::parser::Parser;

/// Why a query was not lowered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LowerError {
    /// The SQL does not parse (sqlparser's message).
    #[error("parse error: {0}")]
    Parse(String),
    /// A construct outside what the tool pool expresses; `code` is the stable reason code suffix
    /// (`subquery`, `case`, `window`, …), `detail` quotes the offending SQL.
    #[error("unsupported {code}: {detail}")]
    Unsupported {
        /// Stable reason code suffix.
        code: &'static str,
        /// The offending expression or clause.
        detail: String,
    },
    /// A table or column the database does not have.
    #[error("schema: {0}")]
    Schema(String),
}

impl LowerError {
    /// The drop reason code: `parse_error`, `unsupported:<code>` or `schema_mismatch`.
    pub fn reason(&self) -> String {
        match self {
            LowerError::Parse(_) => "parse_error".into(),
            LowerError::Unsupported { code, .. } => format!("unsupported:{code}"),
            LowerError::Schema(_) => "schema_mismatch".into(),
        }
    }
}

/// Shorthand for an unsupported-construct error.
pub fn unsupported(code: &'static str, detail: impl std::fmt::Display) -> LowerError {
    LowerError::Unsupported {
        code,
        detail: detail.to_string(),
    }
}

/// Parses one SQLite statement.
pub fn parse(sql: &str) -> Result<Statement, LowerError> {
    let mut stmts = Parser::parse_sql(&dialect::Sqlite::new(), sql).map_err(|e| LowerError::Parse(e.to_string()))?;
    match stmts.len() {
        1 => Ok(stmts.remove(0)),
        n => Err(unsupported("multiple_statements", format!("{n} statements"))),
    }
}
