//! The text-to-SQL question files: BIRD (`question_id, db_id, question, evidence, SQL,
//! difficulty`) and Spider (`db_id, question, query`), one JSON array of records per file
//! ([`read_questions`]); a record without the expected fields is a [`BadRecord`].

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::decode::{invalid_record, read_json_lossy};
use super::{BadRecord, CorpusError, short};
use std::path::Path;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::invalid_line;

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
