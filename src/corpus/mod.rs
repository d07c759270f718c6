//! Source readers: corpus files in, records out. A record that is not what its reader expects
//! is a [`BadRecord`] (file, 0-based record index, what was expected), counted and skipped; a file
//! that cannot be read or is not JSON at all is a [`CorpusError`] naming the file (and line and
//! column for malformed JSON).
//!
//! - [`questions`]: the text-to-SQL question files (BIRD, Spider).
//! - [`descriptions`]: the column descriptions of a database (BIRD
//!   `database_description/<table>.csv`, Spider `tables.json`).
//!
//! The seq and catalog families read their own source formats (`seq::*`, `catalog::*`) with
//! [`read_json`], [`BadRecord`] and [`CorpusError`] from here.

pub mod decode;
pub mod descriptions;
pub mod questions;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

pub use decode::{INVALID_UTF8_MARK, invalid_line, invalid_record, json_lines, read_json_lossy, read_text};
pub use descriptions::{Descriptions, bird_descriptions, spider_descriptions};
pub use questions::{Question, read_questions};

/// A skipped input record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BadRecord {
    /// The file.
    pub file: String,
    /// 0-based record index in the file's top-level array.
    pub record: usize,
    /// What was wrong / expected.
    pub message: String,
}

/// Errors that stop reading a corpus.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// IO on a corpus file.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file is not JSON or not an array (serde_json's message has line and column).
    #[error("{path}: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What was expected.
        message: String,
    },
}

/// Reads a whole JSON file; errors name the file (and line/column for malformed JSON).
pub fn read_json(path: &Path) -> Result<Json, CorpusError> {
    parse_json(path, &read_bytes(path)?)
}

/// Reads a whole file. Errors: IO, naming the file.
pub(crate) fn read_bytes(path: &Path) -> Result<Vec<u8>, CorpusError> {
    std::fs::read(path).map_err(|source| CorpusError::Io {
        path: path.into(),
        source,
    })
}

/// `bytes`, the contents of `path`, as JSON. Errors: malformed JSON, naming the file, line and
/// column.
pub(crate) fn parse_json(path: &Path, bytes: &[u8]) -> Result<Json, CorpusError> {
    serde_json::from_slice(bytes).map_err(|e| CorpusError::Malformed {
        path: path.into(),
        message: format!("not valid JSON: {e}"),
    })
}

/// A JSON value as at most 60 characters of text, for messages.
pub(crate) fn short(v: &Json) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!("{}…", &s[..s.floor_char_boundary(60)])
    } else {
        s
    }
}
