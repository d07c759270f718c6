//! The NL2SQL corpus adapter: BIRD (`question_id, db_id, question, evidence, SQL, difficulty`)
//! and Spider (`db_id, question, query`) question files, plus column descriptions (BIRD
//! `database_description/<table>.csv`, Spider `tables.json` column names).
//!
//! A record that is not an object with the expected fields, or that holds invalid UTF-8, is
//! reported as a [`BadRecord`] (file, 0-based record index, what was expected) and skipped; a
//! file that is not JSON at all is an error naming the file, line and column.
//!
//! The record-level decoding shared by every source reader lives here too: [`read_json_lossy`]
//! and [`read_text`] decode invalid UTF-8 as [`INVALID_UTF8_MARK`] so one bad record never stops a build, and
//! [`invalid_record`] / [`invalid_line`] turn such a record into a bad-record message.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// One text-to-SQL question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// Source item id: BIRD `question_id`, Spider position in `dev.json`.
    pub id: String,
    /// Database id.
    pub db_id: String,
    /// The natural-language question.
    pub question: String,
    /// BIRD external-knowledge evidence.
    pub evidence: Option<String>,
    /// Gold SQL.
    pub sql: String,
    /// BIRD difficulty (`simple`, `moderate`, `challenging`).
    pub difficulty: Option<String>,
}

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
    let bytes = std::fs::read(path).map_err(|source| CorpusError::Io {
        path: path.into(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| CorpusError::Malformed {
        path: path.into(),
        message: format!("not valid JSON: {e}"),
    })
}

/// The character an invalid UTF-8 byte sequence is decoded as by [`read_text`]: U+FDD0, a
/// Unicode noncharacter (reserved for a program's internal use, never in interchanged text), so
/// it cannot be confused with a U+FFFD that the corpus itself contains (MixSNIPS does).
pub const INVALID_UTF8_MARK: char = '\u{fdd0}';

/// Reads a JSON file of records whose text may hold invalid UTF-8: invalid byte sequences are
/// decoded as [`INVALID_UTF8_MARK`] (so the file still parses) and each record reader rejects the records that
/// hold one with [`invalid_record`] — one bad record, counted and skipped, never a fatal error.
/// Errors: IO, or a file that is not JSON even so (file, line and column).
pub fn read_json_lossy(path: &Path) -> Result<Json, CorpusError> {
    let text = read_text(path)?;
    serde_json::from_str(&text).map_err(|e| CorpusError::Malformed {
        path: path.into(),
        message: format!("not valid JSON: {e}"),
    })
}

/// Reads a text file for a line-based reader (TSV, IOB, JSON Lines): each invalid UTF-8
/// sequence becomes [`INVALID_UTF8_MARK`], and the reader rejects the lines that hold one with
/// [`invalid_line`]. Errors: IO.
pub fn read_text(path: &Path) -> Result<String, CorpusError> {
    let bytes = std::fs::read(path).map_err(|source| CorpusError::Io {
        path: path.into(),
        source,
    })?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let mut text = String::with_capacity(e.as_bytes().len());
            for chunk in e.as_bytes().utf8_chunks() {
                text.push_str(chunk.valid());
                if !chunk.invalid().is_empty() {
                    text.push(INVALID_UTF8_MARK);
                }
            }
            text
        }
    })
}

/// Splits JSON Lines text (from [`read_text`]) into records: (0-based line number, the line's
/// value, or why the line is bad: invalid UTF-8 or not valid JSON). Blank lines are skipped.
pub fn json_lines(text: &str) -> Vec<(usize, Result<Json, String>)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let value = match invalid_line(l) {
                Some(message) => Err(message),
                None => serde_json::from_str(l).map_err(|e| format!("not valid JSON: {e}")),
            };
            (i, value)
        })
        .collect()
}

/// The bad-record message for a line holding [`INVALID_UTF8_MARK`] (invalid UTF-8 in the source, see
/// [`read_text`]), with its 1-based column; `None` for a clean line.
pub fn invalid_line(line: &str) -> Option<String> {
    line.chars()
        .position(|c| c == INVALID_UTF8_MARK)
        .map(|col| format!("invalid UTF-8 at column {}", col + 1))
}

/// The bad-record message for a JSON record holding [`INVALID_UTF8_MARK`] in a string or key (invalid UTF-8 in
/// the source, see [`read_json_lossy`]), naming the first such field; `None` for a clean record.
pub fn invalid_record(rec: &Json) -> Option<String> {
    fn find(v: &Json, path: &str) -> Option<String> {
        match v {
            Json::String(s) if s.contains(INVALID_UTF8_MARK) => Some(path.to_string()),
            Json::Array(a) => a.iter().enumerate().find_map(|(i, x)| find(x, &format!("{path}[{i}]"))),
            Json::Object(o) => o.iter().find_map(|(k, x)| {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                if k.contains(INVALID_UTF8_MARK) {
                    Some(p)
                } else {
                    find(x, &p)
                }
            }),
            _ => None,
        }
    }
    find(rec, "").map(|field| {
        if field.is_empty() {
            "invalid UTF-8".to_string()
        } else {
            format!("invalid UTF-8 in field `{field}`")
        }
    })
}

/// Reads a question file of the given `format` (`bird` or `spider`). A record holding invalid
/// UTF-8 is a [`BadRecord`] like a record missing a field.
pub fn read_questions(path: &Path, format: &str) -> Result<(Vec<Question>, Vec<BadRecord>), CorpusError> {
    let value = read_json_lossy(path)?;
    let Json::Array(records) = value else {
        return Err(CorpusError::Malformed {
            path: path.into(),
            message: "expected a JSON array of question records".into(),
        });
    };
    let file = path.display().to_string();
    let mut questions = Vec::new();
    let mut bad = Vec::new();
    for (i, rec) in records.iter().enumerate() {
        match invalid_record(rec).map_or_else(|| question(rec, i, format), Err) {
            Ok(q) => questions.push(q),
            Err(message) => bad.push(BadRecord {
                file: file.clone(),
                record: i,
                message,
            }),
        }
    }
    Ok((questions, bad))
}

fn question(rec: &Json, index: usize, format: &str) -> Result<Question, String> {
    let obj = rec
        .as_object()
        .ok_or_else(|| format!("expected an object, got {}", short(rec)))?;
    let text = |field: &str| -> Result<String, String> {
        match obj.get(field) {
            Some(Json::String(s)) => Ok(s.clone()),
            Some(other) => Err(format!("field `{field}`: expected a string, got {}", short(other))),
            None => Err(format!("missing field `{field}`")),
        }
    };
    let opt = |field: &str| obj.get(field).and_then(Json::as_str).map(str::to_string);
    match format {
        "bird" => {
            let id = match obj.get("question_id") {
                Some(Json::Number(n)) => n.to_string(),
                Some(Json::String(s)) => s.clone(),
                Some(other) => return Err(format!("field `question_id`: expected a number, got {}", short(other))),
                None => index.to_string(),
            };
            Ok(Question {
                id,
                db_id: text("db_id")?,
                question: text("question")?,
                evidence: opt("evidence"),
                sql: text("SQL")?,
                difficulty: opt("difficulty"),
            })
        }
        _ => Ok(Question {
            id: index.to_string(),
            db_id: text("db_id")?,
            question: text("question")?,
            evidence: None,
            sql: text("query")?,
            difficulty: None,
        }),
    }
}

fn short(v: &Json) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!("{}…", &s[..s.floor_char_boundary(60)])
    } else {
        s
    }
}

/// Column descriptions of one database: lower-cased `table` → lower-cased `column` → text.
pub type Descriptions = BTreeMap<String, BTreeMap<String, String>>;

/// BIRD `database_description/*.csv` of one database (empty when the folder is absent).
/// The description is `column_description`, else `column_name`; unreadable files are skipped.
pub fn bird_descriptions(db_dir: &Path) -> Descriptions {
    let mut out = Descriptions::new();
    let Ok(entries) = std::fs::read_dir(db_dir.join("database_description")) else {
        return out;
    };
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    for file in files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")))
    {
        let Ok(bytes) = std::fs::read(&file) else { continue };
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim_start_matches('\u{feff}');
        let table = file
            .file_stem()
            .map(|s| s.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(text.as_bytes());
        let cols = out.entry(table).or_default();
        for row in reader.records().flatten() {
            let get = |i: usize| {
                row.get(i)
                    .map(|s| s.trim().replace(['\n', '\r'], " "))
                    .unwrap_or_default()
            };
            let (column, name, desc) = (get(0), get(1), get(2));
            let text = if !desc.is_empty() { desc } else { name };
            if !column.is_empty() {
                cols.insert(column.to_lowercase(), text);
            }
        }
    }
    out
}

/// Spider `tables.json`: per database, the readable column names as descriptions.
pub fn spider_descriptions(path: &Path) -> Result<BTreeMap<String, Descriptions>, CorpusError> {
    let value = read_json(path)?;
    let mut out = BTreeMap::new();
    for db in value.as_array().into_iter().flatten() {
        let Some(db_id) = db.get("db_id").and_then(Json::as_str) else {
            continue;
        };
        let tables: Vec<&str> = db
            .get("table_names_original")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(Json::as_str)
            .collect();
        let originals = db.get("column_names_original").and_then(Json::as_array);
        let readable = db.get("column_names").and_then(Json::as_array);
        let mut descs = Descriptions::new();
        if let (Some(orig), Some(read)) = (originals, readable) {
            for (o, r) in orig.iter().zip(read) {
                let (Some(t), Some(c), Some(name)) = (o[0].as_i64(), o[1].as_str(), r[1].as_str()) else {
                    continue;
                };
                if let Some(table) = usize::try_from(t).ok().and_then(|t| tables.get(t)) {
                    descs
                        .entry(table.to_lowercase())
                        .or_default()
                        .insert(c.to_lowercase(), name.to_string());
                }
            }
        }
        out.insert(db_id.to_string(), descs);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_records_are_reported_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.json");
        std::fs::write(&path, r#"[{"db_id":"a","question":"q","query":"SELECT 1"}, 5, {"db_id":"a","question":3,"query":"x"}, {"db_id":"a","query":"x"}]"#).unwrap();
        let (qs, bad) = read_questions(&path, "spider").unwrap();
        assert_eq!(qs.len(), 1);
        assert_eq!(bad.iter().map(|b| b.record).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert!(
            bad[1].message.contains("field `question`: expected a string"),
            "{:?}",
            bad[1]
        );
        assert!(bad[2].message.contains("missing field `question`"));
    }

    #[test]
    fn invalid_utf8_in_one_question_is_one_bad_record() {
        // A temp copy of the real Spider dev.json with one byte of question 3 made invalid.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.json");
        let real = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora/spider/dev.json");
        let mut bytes = std::fs::read(&real).unwrap();
        let (want, _) = read_questions(&real, "spider").unwrap();
        let needle = b"\"question\": \"";
        let at = (0..bytes.len() - needle.len())
            .filter(|&i| &bytes[i..i + needle.len()] == needle)
            .nth(3)
            .unwrap();
        bytes[at + needle.len() + 1] = 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let (qs, bad) = read_questions(&path, "spider").unwrap();
        assert_eq!(qs.len(), want.len() - 1);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!(bad[0].record, 3);
        assert!(
            bad[0].message.contains("invalid UTF-8 in field `question`"),
            "{:?}",
            bad[0]
        );
        assert_eq!(qs[3].id, "4", "later records keep their ids");
    }

    #[test]
    fn invalid_line_and_record_messages() {
        assert_eq!(
            invalid_line("ab\u{fdd0}c").as_deref(),
            Some("invalid UTF-8 at column 3")
        );
        // A U+FFFD in the corpus itself (MixSNIPS has some) is text, not a decoding error.
        assert_eq!(invalid_line("ab\u{fffd}c"), None);
        assert_eq!(invalid_line("abc"), None);
        let rec: Json = serde_json::json!({"a": {"b": ["x", "y\u{fdd0}"]}});
        assert_eq!(invalid_record(&rec).as_deref(), Some("invalid UTF-8 in field `a.b[1]`"));
    }

    #[test]
    fn malformed_file_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.json");
        std::fs::write(&path, "[\n{\"db_id\": \"a\",\n").unwrap();
        let err = read_questions(&path, "bird").unwrap_err().to_string();
        assert!(err.contains("dev.json") && err.contains("line 3"), "{err}");
    }
}
