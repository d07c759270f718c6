//! The final answer of a trajectory, built only from what the tool messages showed.
//!
//! A trajectory teaches a model to answer from tool results, so its final message may contain no
//! value that no tool message showed. The answer is read back from the shown results of the
//! *sink* calls (those no later call refers to as `$label$`, as in the executor's final answer):
//! SLOT/SEL `{"label", "output"}` (a scalar, a list, `{"values", "total", "truncated"}` or a table
//! `{"columns", "rows", "total_rows", "truncated"}`), REST rows or `{"rows", "total_rows",
//! "truncated"}`. When a result was cut to its first rows, the answer lists those rows and states
//! the total and what it covers (e.g. `The result has 230 rows in total; the first 20, as the tool
//! listed them: …`); it never lists rows the model did not see. The answer is one sentence in
//! one documented style ([`answer_text`]).

use serde_json::Value as Json;

/// The shown part of an answer: rows (each a list of cells) and the total row count.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    /// The rows the tool messages showed, in their order.
    pub rows: Vec<Vec<Json>>,
    /// How many rows the full result has (≥ `rows.len()`).
    pub total: usize,
}

/// Whether `v` (or anything nested in it) is the label reference `$label$`.
fn refers_to(v: &Json, label: &str) -> bool {
    match v {
        Json::String(s) => {
            s.len() == label.len() + 2 && s.starts_with('$') && s.ends_with('$') && &s[1..s.len() - 1] == label
        }
        Json::Array(a) => a.iter().any(|x| refers_to(x, label)),
        Json::Object(o) => o.values().any(|x| refers_to(x, label)),
        _ => false,
    }
}

/// Indices of the sink calls: calls no later call refers to (arguments as JSON objects).
pub fn sinks(arguments: &[(&str, Json)]) -> Vec<usize> {
    (0..arguments.len())
        .filter(|&i| !arguments[i + 1..].iter().any(|(_, a)| refers_to(a, arguments[i].0)))
        .collect()
}

/// Columns of one shown SLOT/SEL output: (columns, total rows).
fn output_columns(o: &Json) -> (Vec<Vec<Json>>, usize) {
    match o {
        Json::Array(values) => (vec![values.clone()], values.len()),
        Json::Object(m) if m.contains_key("values") => {
            let values = m["values"].as_array().cloned().unwrap_or_default();
            let total = m
                .get("total")
                .and_then(Json::as_u64)
                .map_or(values.len(), |t| t as usize);
            (vec![values], total)
        }
        Json::Object(m) if m.contains_key("rows") => {
            let rows: Vec<Vec<Json>> = m["rows"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| r.as_array().cloned().unwrap_or_default())
                .collect();
            let width = m.get("columns").and_then(Json::as_array).map_or(0, Vec::len);
            let cols = (0..width)
                .map(|c| rows.iter().map(|r| r.get(c).cloned().unwrap_or(Json::Null)).collect())
                .collect();
            let total = m
                .get("total_rows")
                .and_then(Json::as_u64)
                .map_or(rows.len(), |t| t as usize);
            (cols, total)
        }
        scalar => (vec![vec![scalar.clone()]], 1),
    }
}

/// The shown answer of a SLOT/SEL trajectory from the sink calls' tool messages
/// (`{"label", "output"}` JSON text each).
pub fn shown_tools(sink_results: &[&str]) -> Shown {
    let mut columns: Vec<Vec<Json>> = Vec::new();
    let mut total = 0;
    for r in sink_results {
        let v: Json = serde_json::from_str(r).unwrap_or(Json::Null);
        let (cols, t) = output_columns(&v["output"]);
        columns.extend(cols);
        total = total.max(t);
    }
    let shown = columns.iter().map(Vec::len).min().unwrap_or(0);
    Shown {
        rows: (0..shown)
            .map(|r| columns.iter().map(|c| c[r].clone()).collect())
            .collect(),
        total: total.max(shown),
    }
}

/// The shown answer of a REST trajectory from its last tool message (rows, or the truncated
/// object).
pub fn shown_rest(result: &str) -> Shown {
    let v: Json = serde_json::from_str(result).unwrap_or(Json::Null);
    let (rows, total) = match &v {
        Json::Object(m) => {
            let rows = m.get("rows").cloned().unwrap_or(Json::Null);
            let n = rows.as_array().map_or(0, Vec::len);
            (
                rows,
                m.get("total_rows").and_then(Json::as_u64).map_or(n, |t| t as usize),
            )
        }
        rows => (rows.clone(), rows.as_array().map_or(0, Vec::len)),
    };
    let rows: Vec<Vec<Json>> = rows
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r.as_array().cloned().unwrap_or_else(|| vec![r.clone()]))
        .collect();
    let total = total.max(rows.len());
    Shown { rows, total }
}

/// The text of a number at the gold answer's precision: an integer (or an integral float, `4.0`)
/// as an integer; any other float with the fewest decimals (at most 20) that keep it equal to
/// the exact value within 1e-9 relative — the tolerance under which answers equal the gold
/// (DESIGN.md: reals within 1e-9 relative) — so `0.30000000000000004` is `0.3` and
/// `3.3333333333333335` is `3.333333333`.
pub fn number_text(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let x = n.as_f64().unwrap_or(f64::NAN);
    if !x.is_finite() {
        return n.to_string();
    }
    if x.fract() == 0.0 && x.abs() < 1e15 {
        return format!("{x:.0}");
    }
    (0..=20)
        .map(|d| format!("{x:.d$}"))
        .find(|t| t.parse::<f64>().is_ok_and(|y| (y - x).abs() <= 1e-9 * x.abs()))
        .unwrap_or_else(|| n.to_string())
}

/// One cell as the answer writes it: text as it is, numbers by [`number_text`], SQL NULL as
/// `null`, anything else (a nested value) as JSON.
pub fn cell_text(c: &Json) -> String {
    match c {
        Json::String(s) => s.clone(),
        Json::Number(n) => number_text(n),
        other => other.to_string(),
    }
}

/// Rows as the answer lists them: one column → the values joined by `; `; several → each row
/// as `(a, b)`, rows joined by `; `.
fn rows_text(rows: &[Vec<Json>]) -> String {
    let one_column = rows.iter().all(|r| r.len() == 1);
    let row = |r: &Vec<Json>| {
        let cells: Vec<String> = r.iter().map(cell_text).collect();
        if one_column {
            cells.join(", ")
        } else {
            format!("({})", cells.join(", "))
        }
    };
    rows.iter().map(row).collect::<Vec<_>>().join("; ")
}

/// `text` ended as a sentence (a full stop unless it already ends with one).
fn sentence(text: String) -> String {
    if text.ends_with('.') { text } else { format!("{text}.") }
}

/// The final assistant message for `shown`, listing at most `limit` rows (a user's constraint;
/// `None`: every shown row): one sentence with the values (the documented answer style, issue
/// 29), never raw JSON —
/// - one cell: `The answer is 4.`; one row: `The answer is (France, 3).`;
/// - every row listed: `The answer has 3 values: Paris; Lyon; Nice.` (one column) or `The answer
///   has 2 rows: (France, 3); (Spain, 2).`; no row: `The answer has no rows.`;
/// - fewer rows listed than the result has: `The result has 230 rows in total; the first 20, as
///   the tool listed them: (a, 1); (b, 2).` (`the first, as the tool listed it: …` for one).
///
/// Cells by [`cell_text`] (integers as integers, floats at the gold's precision).
pub fn answer_text(shown: &Shown, limit: Option<usize>) -> String {
    let listed = limit.map_or(shown.rows.len(), |l| l.min(shown.rows.len()));
    let rows = &shown.rows[..listed];
    if listed == shown.total {
        return sentence(match rows {
            [] => "The answer has no rows".to_string(),
            [row] if row.len() == 1 => format!("The answer is {}", cell_text(&row[0])),
            [_] => format!("The answer is {}", rows_text(rows)),
            _ => {
                let what = if rows.iter().all(|r| r.len() == 1) {
                    "values"
                } else {
                    "rows"
                };
                format!("The answer has {listed} {what}: {}", rows_text(rows))
            }
        });
    }
    let which = if listed == 1 {
        "the first, as the tool listed it".to_string()
    } else {
        format!("the first {listed}, as the tool listed them")
    };
    sentence(format!(
        "The result has {} rows in total; {which}: {}",
        shown.total,
        rows_text(rows)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truncated_results_state_the_total_and_list_only_shown_rows() {
        let s = shown_rest(&json!({"rows": [[1], [2]], "total_rows": 230, "truncated": true}).to_string());
        assert_eq!(
            answer_text(&s, None),
            "The result has 230 rows in total; the first 2, as the tool listed them: 1; 2."
        );
        let one = json!({"label": "a", "output": "Paris"}).to_string();
        let one = shown_tools(&[one.as_str()]);
        assert_eq!(answer_text(&one, None), "The answer is Paris.");
        let a = json!({"label": "a", "output": {"values": ["x", "y"], "total": 30, "truncated": true}}).to_string();
        let b = json!({"label": "b", "output": {"values": [1, 2], "total": 30, "truncated": true}}).to_string();
        let cols = shown_tools(&[a.as_str(), b.as_str()]);
        assert_eq!(cols.rows, vec![vec![json!("x"), json!(1)], vec![json!("y"), json!(2)]]);
        assert_eq!(
            answer_text(&cols, Some(1)),
            "The result has 30 rows in total; the first, as the tool listed it: (x, 1)."
        );
    }

    #[test]
    fn answers_are_sentences_with_integers_as_integers_and_floats_at_the_gold_precision() {
        let rows = |r: Json| shown_rest(&r.to_string());
        assert_eq!(answer_text(&rows(json!([[4.0]])), None), "The answer is 4.");
        assert_eq!(
            answer_text(&rows(json!([[3.3333333333333335]])), None),
            "The answer is 3.333333333."
        );
        assert_eq!(
            answer_text(&rows(json!([[0.30000000000000004]])), None),
            "The answer is 0.3."
        );
        assert_eq!(answer_text(&rows(json!([[-12.5]])), None), "The answer is -12.5.");
        assert_eq!(
            answer_text(&rows(json!([[1e-12]])), None),
            "The answer is 0.000000000001."
        );
        assert_eq!(
            answer_text(&rows(json!([["France", 3.0], ["Spain", 2]])), None),
            "The answer has 2 rows: (France, 3); (Spain, 2)."
        );
        assert_eq!(
            answer_text(&rows(json!([["Paris"], ["Lyon"], [null]])), None),
            "The answer has 3 values: Paris; Lyon; null."
        );
        assert_eq!(
            answer_text(&rows(json!([["St. Louis Co."]])), None),
            "The answer is St. Louis Co."
        );
        // Every rounded float stays equal to its exact value within the gold tolerance.
        for x in [2.0f64 / 3.0, 1234.5678901234, 1e-7 / 3.0, 98765432.123456789] {
            let t = number_text(&serde_json::Number::from_f64(x).unwrap());
            let y: f64 = t.parse().unwrap();
            assert!((y - x).abs() <= 1e-9 * x.abs() && t.len() < 20, "{x} -> {t}");
        }
        assert!(
            !answer_text(&rows(json!([[1, 2], [3, 4]])), None).contains('['),
            "no raw JSON arrays"
        );
        assert_eq!(
            answer_text(&rows(json!([["France", 3]])), None),
            "The answer is (France, 3)."
        );
    }

    #[test]
    fn sinks_are_calls_no_later_call_refers_to() {
        let calls = [
            ("a", json!({})),
            ("b", json!({"data_source": "$a$"})),
            ("c", json!({"data_source": "$a$"})),
        ];
        assert_eq!(sinks(&calls), vec![1, 2]);
    }
}
