//! The NL2SQL corpus adapter: BIRD (`question_id, db_id, question, evidence, SQL, difficulty`)
//! and Spider (`db_id, question, query`) question files, plus column descriptions (BIRD
//! `database_description/<table>.csv`, Spider `tables.json` column names).
//!
//! A record that is not an object with the expected fields is reported as a [`BadRecord`]
//! (file, 0-based record index, what was expected) and skipped; a file that is not JSON at all
//! is an error naming the file, line and column.

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
    #[error("{path}: {source}")]
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

/// Reads a question file of the given `format` (`bird` or `spider`).
pub fn read_questions(path: &Path, format: &str) -> Result<(Vec<Question>, Vec<BadRecord>), CorpusError> {
    let value = read_json(path)?;
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
        match question(rec, i, format) {
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
    fn malformed_file_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.json");
        std::fs::write(&path, "[\n{\"db_id\": \"a\",\n").unwrap();
        let err = read_questions(&path, "bird").unwrap_err().to_string();
        assert!(err.contains("dev.json") && err.contains("line 3"), "{err}");
    }
}
