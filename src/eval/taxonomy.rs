//! The error taxonomy (issue 28, item 5): what went wrong in each row, by kind, over every
//! scored row (Live API-Bench §5's error analysis; BFCL's checker reports the same kinds).
//!
//! The gold and predicted calls (labels resolved, [`super::metrics::labels`]) are aligned as the
//! intent score aligns them ([`align`]: position by position, or in any order on an unordered
//! row). Then:
//! - a matched pair (same tool) is checked argument by argument: a gold argument the call lacks
//!   is `missing_argument`, an argument the gold call lacks `extra_argument`, a shared argument
//!   with a different value ([`value_eq`]) `bad_reference` when either value is a `$label$`
//!   reference (it points to a different call, or to none), else `wrong_argument`;
//! - the unmatched predicted and gold calls are paired in order: a predicted call naming no
//!   tool of the row's toolkit is `hallucinated_tool`, else `wrong_tool`; a predicted call left
//!   over is `hallucinated_tool` (unknown name) or `extra_call`, a gold call left over
//!   `missing_call`;
//! - `format_error`: a call the answer held but that could not be read (no name, arguments not
//!   an object: the predictions' `malformed_call` problems), and a direct answer whose text held
//!   no call list at all (`parsed: false` in `predictions.jsonl`).
//!
//! Each kind counts occurrences (calls or arguments); the report also gives the rows with at
//! least one. Failed rows (no answer) have none.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::metrics::intent::{Order, align};
use super::metrics::labels::is_reference;
use super::metrics::value_eq;
use crate::tools::Call;

/// Every kind, in report order.
pub const KINDS: [&str; 9] = [
    "wrong_tool",
    "hallucinated_tool",
    "wrong_argument",
    "missing_argument",
    "extra_argument",
    "bad_reference",
    "missing_call",
    "extra_call",
    "format_error",
];

/// A kind's totals over rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCount {
    /// Occurrences (calls or arguments).
    pub count: usize,
    /// Rows with at least one.
    pub rows: usize,
}

/// One row's errors by kind (module docs); `gold` and `pred` with labels resolved, `tools` the
/// names of the row's toolkit, `malformed` the calls that could not be read, `unparsed` whether the answer
/// held no call list. Kinds that did not occur are absent.
pub fn classify(
    gold: &[Call],
    pred: &[Call],
    order: Order,
    tools: &[&str],
    malformed: usize,
    unparsed: bool,
) -> BTreeMap<String, usize> {
    let mut out: BTreeMap<String, usize> = BTreeMap::new();
    let mut add = |k: &str, n: usize| {
        if n > 0 {
            *out.entry(k.to_string()).or_default() += n;
        }
    };
    let pairs = align(gold, pred, order);
    for &(i, j) in &pairs {
        let (g, p) = (&gold[i], &pred[j]);
        add(
            "missing_argument",
            g.arguments.keys().filter(|k| !p.arguments.contains_key(*k)).count(),
        );
        add(
            "extra_argument",
            p.arguments.keys().filter(|k| !g.arguments.contains_key(*k)).count(),
        );
        for (k, gv) in &g.arguments {
            let Some(pv) = p.arguments.get(k) else { continue };
            if !value_eq(gv, pv) {
                add(
                    if is_reference(gv) || is_reference(pv) {
                        "bad_reference"
                    } else {
                        "wrong_argument"
                    },
                    1,
                );
            }
        }
    }
    let known = |name: &str| tools.contains(&name);
    let gold_left: Vec<usize> = (0..gold.len())
        .filter(|i| !pairs.iter().any(|&(g, _)| g == *i))
        .collect();
    let pred_left: Vec<usize> = (0..pred.len())
        .filter(|j| !pairs.iter().any(|&(_, p)| p == *j))
        .collect();
    for (k, &j) in pred_left.iter().enumerate() {
        let kind = match (known(&pred[j].name), k < gold_left.len()) {
            (false, _) => "hallucinated_tool",
            (true, true) => "wrong_tool",
            (true, false) => "extra_call",
        };
        add(kind, 1);
    }
    add("missing_call", gold_left.len().saturating_sub(pred_left.len()));
    add("format_error", malformed + unparsed as usize);
    out
}

/// The totals of every kind over `rows` (each row's kinds), all kinds present.
pub fn totals<'a>(rows: impl IntoIterator<Item = &'a BTreeMap<String, usize>>) -> BTreeMap<String, KindCount> {
    let mut out: BTreeMap<String, KindCount> = KINDS.iter().map(|k| (k.to_string(), KindCount::default())).collect();
    for r in rows {
        for (k, n) in r {
            let e = out.entry(k.clone()).or_default();
            e.count += n;
            e.rows += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::metrics::labels::resolve;
    use serde_json::{Value, json};

    fn call(name: &str, args: Value, label: &str) -> Call {
        Call {
            name: name.into(),
            arguments: args.as_object().unwrap().clone(),
            label: label.into(),
        }
    }

    const TOOLS: [&str; 3] = ["filter_data", "aggregate_data", "sort_data"];

    fn kinds(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
        pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    #[test]
    fn each_kind_counted_by_hand() {
        let setup = [call("initialize_active_data", json!({}), "starting_table_var")];
        let gold = [
            call(
                "filter_data",
                json!({"data_source": "$starting_table_var$", "filter_column": "a", "value": 1}),
                "F",
            ),
            call(
                "aggregate_data",
                json!({"data_source": "$F$", "column": "b", "op": "sum"}),
                "A",
            ),
            call("sort_data", json!({"data_source": "$A$"}), "S"),
        ];
        // Call 0: `value` wrong, `extra` extra; call 1: its source is the loaded table, not
        // call 0 (a bad reference), `op` missing; call 2: a tool the toolkit does not have.
        let pred = [
            call(
                "filter_data",
                json!({"data_source": "$starting_table_var$", "filter_column": "a", "value": 2, "extra": 1}),
                "X",
            ),
            call(
                "aggregate_data",
                json!({"data_source": "$starting_table_var$", "column": "b"}),
                "Y",
            ),
            call("made_up", json!({}), "Z"),
        ];
        let (g, p) = (resolve(&setup, &gold), resolve(&setup, &pred));
        assert_eq!(
            classify(&g, &p, Order::Positional, &TOOLS, 1, false),
            kinds(&[
                ("wrong_argument", 1),
                ("extra_argument", 1),
                ("bad_reference", 1),
                ("missing_argument", 1),
                ("hallucinated_tool", 1),
                ("format_error", 1)
            ])
        );
        // The same calls with labels renamed consistently: no error at all.
        let renamed: Vec<Call> = gold
            .iter()
            .map(|c| {
                let text = Value::Object(c.arguments.clone())
                    .to_string()
                    .replace("$F$", "$OUT_0$")
                    .replace("$A$", "$OUT_1$");
                call(&c.name, serde_json::from_str(&text).unwrap(), "")
            })
            .enumerate()
            .map(|(k, mut c)| {
                c.label = format!("OUT_{k}");
                c
            })
            .collect();
        assert_eq!(
            classify(&g, &resolve(&setup, &renamed), Order::Positional, &TOOLS, 0, false),
            kinds(&[])
        );
    }

    #[test]
    fn unmatched_calls_are_wrong_missing_or_extra() {
        let f = call("filter_data", json!({}), "");
        let a = call("aggregate_data", json!({}), "");
        let s = call("sort_data", json!({}), "");
        let o = Order::Positional;
        // Position 0 has the wrong (known) tool, position 1 nothing.
        assert_eq!(
            classify(&[f.clone(), a.clone()], &[a.clone()], o, &TOOLS, 0, false),
            kinds(&[("wrong_tool", 1), ("missing_call", 1)])
        );
        assert_eq!(
            classify(
                &[f.clone(), a.clone()],
                &[f.clone(), a.clone(), s.clone()],
                o,
                &TOOLS,
                0,
                false
            ),
            kinds(&[("extra_call", 1)])
        );
        // In any order, the swapped calls match; a text answer without calls is a format error
        // and both gold calls are missing.
        assert_eq!(
            classify(&[f.clone(), a.clone()], &[a, f.clone()], Order::Free, &TOOLS, 0, false),
            kinds(&[])
        );
        assert_eq!(
            classify(&[f.clone(), s], &[], o, &TOOLS, 0, true),
            kinds(&[("missing_call", 2), ("format_error", 1)])
        );
        let t = totals([
            &kinds(&[("wrong_tool", 2)]),
            &kinds(&[("wrong_tool", 1), ("extra_call", 1)]),
        ]);
        assert_eq!(t["wrong_tool"], KindCount { count: 3, rows: 2 });
        assert_eq!(t["extra_call"], KindCount { count: 1, rows: 1 });
        assert_eq!(t["bad_reference"], KindCount::default());
        let _ = f;
    }
}
