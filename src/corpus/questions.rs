//! The text-to-SQL question files: BIRD (`question_id, db_id, question, evidence, SQL,
//! difficulty`) and Spider (`db_id, question, query`), one JSON array of records per file
//! ([`read_questions`]); a record without the expected fields is a [`BadRecord`].

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::decode::{invalid_record, read_text};
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
///
/// A file whose every record is well formed is read straight into the fields it needs (Spider's
/// parsed `sql` trees are skipped, not built: they were most of reading Spider dev, issue 17);
/// any other file is read record by record as JSON values, which names each bad record.
pub fn read_questions(path: &Path, format: &str) -> Result<(Vec<Question>, Vec<BadRecord>), CorpusError> {
    let text = read_text(path)?;
    match well_formed(&text, format) {
        Some(questions) => Ok((questions, Vec::new())),
        None => by_record(path, &text, format),
    }
}

/// [`read_questions`] for any file: every record as a JSON value, each bad one named.
fn by_record(path: &Path, text: &str, format: &str) -> Result<(Vec<Question>, Vec<BadRecord>), CorpusError> {
    let value: Json = serde_json::from_str(text).map_err(|e| CorpusError::Malformed {
        path: path.into(),
        message: format!("not valid JSON: {e}"),
    })?;
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

/// The questions of a file every record of which is an object with the fields [`question`]
/// reads, each of the type it expects, and no invalid UTF-8; `None` for any other file (read by
/// [`question`], which names what is wrong). Same questions as [`question`] gives.
fn well_formed(text: &str, format: &str) -> Option<Vec<Question>> {
    use serde_json::value::RawValue;
    if text.contains(super::INVALID_UTF8_MARK) {
        return None;
    }
    // Objects only (a struct would also accept an array); a repeated key keeps its last value,
    // as in a JSON value.
    let records: Vec<std::collections::HashMap<&str, &RawValue>> = serde_json::from_str(text).ok()?;
    records
        .iter()
        .enumerate()
        .map(|(index, rec)| {
            let string = |field: &str| serde_json::from_str::<String>(rec.get(field)?.get()).ok();
            Some(match format {
                "bird" => Question {
                    id: match rec.get("question_id") {
                        None => index.to_string(),
                        Some(raw) => match serde_json::from_str::<Json>(raw.get()).ok()? {
                            Json::Number(n) => n.to_string(),
                            Json::String(s) => s,
                            _ => return None,
                        },
                    },
                    db_id: string("db_id")?,
                    question: string("question")?,
                    evidence: string("evidence"),
                    sql: string("SQL")?,
                    difficulty: string("difficulty"),
                },
                _ => Question {
                    id: index.to_string(),
                    db_id: string("db_id")?,
                    question: string("question")?,
                    evidence: None,
                    sql: string("query")?,
                    difficulty: None,
                },
            })
        })
        .collect()
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
    fn well_formed_files_read_as_record_by_record_and_others_fall_back() {
        let corpora = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora");
        let path = Path::new("q.json");
        let slow = |text: &str, format: &str| by_record(path, text, format).unwrap();
        for (file, format) in [
            ("spider/dev.json", "spider"),
            ("bird/dev_databases/mini_dev_sqlite.json", "bird"),
        ] {
            let text = std::fs::read_to_string(corpora.join(file)).unwrap();
            let fast = well_formed(&text, format).expect("the real file is well formed");
            assert_eq!((fast, vec![]), slow(&text, format), "{file}");
        }
        // Records the value reader names as bad, or reads differently from a typed reader: the
        // direct reader must not take them.
        for (text, format) in [
            (r#"[{"db_id":"a","question":"q","query":null}]"#, "spider"),
            (r#"[["a","q","SELECT 1"]]"#, "spider"),
            (r#"[{"db_id":"a","question":3,"query":"x"}]"#, "spider"),
            (r#"[{"question_id":null,"db_id":"a","question":"q","SQL":"x"}]"#, "bird"),
            (r#"[{"question_id":[1],"db_id":"a","question":"q","SQL":"x"}]"#, "bird"),
            (r#"[{"db_id":"a","question":"q"}]"#, "bird"),
            (
                "[{\"db_id\":\"a\",\"question\":\"q\u{fdd0}\",\"query\":\"x\"}]",
                "spider",
            ),
        ] {
            assert_eq!(well_formed(text, format), None, "{text}");
            assert_eq!(slow(text, format).1.len(), 1, "{text}");
        }
        // Records both read alike: a repeated key keeps its last value, an escaped key, optional
        // fields that are not strings, numeric and text ids.
        for (text, format) in [
            (r#"[{"db_id":"a","question":"q","query":"x","query":"y"}]"#, "spider"),
            (
                r#"[{"db_\u0069d":"a","question":"q","query":"x","sql":{"a":[1,2]}}]"#,
                "spider",
            ),
            (
                r#"[{"question_id":7,"db_id":"a","question":"q","SQL":"x","evidence":null,"difficulty":3}]"#,
                "bird",
            ),
            (
                r#"[{"question_id":"b7","db_id":"a","question":"q","SQL":"x","evidence":"e"}, {"db_id":"a","question":"q","SQL":"x"}]"#,
                "bird",
            ),
        ] {
            let (questions, bad) = slow(text, format);
            assert!(bad.is_empty(), "{text}");
            if let Some(fast) = well_formed(text, format) {
                assert_eq!(fast, questions, "{text}");
            }
        }
    }

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
