//! Record-level decoding shared by every source reader: [`read_json_lossy`] and [`read_text`]
//! decode invalid UTF-8 as [`INVALID_UTF8_MARK`] so one bad record never stops a build, and
//! [`invalid_record`] / [`invalid_line`] turn such a record into a bad-record message;
//! [`json_lines`] splits JSON Lines text into records.

use std::path::Path;

use serde_json::Value as Json;

use super::CorpusError;

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
    Ok(match String::from_utf8(super::read_bytes(path)?) {
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
    // Whether `v` holds the mark anywhere: checked before a field path is built, so a clean
    // record costs a walk, not a path string per node (3% of a Spider build, issue 17).
    fn marked(v: &Json) -> bool {
        match v {
            Json::String(s) => s.contains(INVALID_UTF8_MARK),
            Json::Array(a) => a.iter().any(marked),
            Json::Object(o) => o.iter().any(|(k, x)| k.contains(INVALID_UTF8_MARK) || marked(x)),
            _ => false,
        }
    }
    fn find(v: &Json, path: &str) -> Option<String> {
        match v {
            Json::String(s) if s.contains(INVALID_UTF8_MARK) => Some(path.to_string()),
            Json::Array(a) => a
                .iter()
                .enumerate()
                .filter(|(_, x)| marked(x))
                .find_map(|(i, x)| find(x, &format!("{path}[{i}]"))),
            Json::Object(o) => o
                .iter()
                .filter(|(k, x)| k.contains(INVALID_UTF8_MARK) || marked(x))
                .find_map(|(k, x)| {
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
