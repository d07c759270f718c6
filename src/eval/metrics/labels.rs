//! `$label$` references compared by the call they point to (alpha-equivalence).
//!
//! A label is the name a sequence gives an earlier call's output (`FILTERED_DF_0`); an argument
//! `"$FILTERED_DF_0$"` is a reference to that call. The model is never shown the gold's label
//! names, so two sequences that differ only in a consistent renaming of their labels are the same
//! program and must score the same on every metric. [`resolve`] rewrites every reference (a whole
//! string argument `$L$`, also inside arrays and objects) into a token naming the call it points
//! to by its tool name and its occurrence among the sequence's calls of that name
//! (`filter_data` #0, #1, …; the setup steps first). Two references are then equal under
//! [`super::value_eq`] exactly when they point to the same call of the two sequences, whatever
//! the labels; a wrong argument of the referenced call is that call's error, not the
//! reference's (it is not counted twice).
//!
//! Which call a reference points to: the setup steps come first (their labels, such as
//! `starting_table_var`, are the framework's), then the calls in order; a reference in call `i`
//! points to the latest call before `i` with that label, else (a forward reference, e.g. in a
//! reordered prediction) the first call after `i` with it; a label no call defines stays the
//! literal string, so it matches nothing but the same literal.

use std::collections::HashMap;

use serde_json::Value;

use crate::tools::{Call, as_label_ref};

/// Marks a resolved reference token; a control character no tool argument carries.
const REF: char = '\u{1}';

/// Whether `v` is a reference: a token [`resolve`] wrote, or a `$label$` no call defines.
pub fn is_reference(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.starts_with(REF)) || as_label_ref(v).is_some()
}

/// `calls` with every `$label$` reference replaced by the token of the call it points to
/// (module docs); `setup` are the framework's steps run before them (their labels resolvable,
/// themselves not returned). Names and labels are kept.
pub fn resolve(setup: &[Call], calls: &[Call]) -> Vec<Call> {
    let all: Vec<&Call> = setup.iter().chain(calls).collect();
    let mut by_label: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut tokens = Vec::with_capacity(all.len());
    for (i, c) in all.iter().enumerate() {
        if !c.label.is_empty() {
            by_label.entry(c.label.as_str()).or_default().push(i);
        }
        let n = seen.entry(c.name.as_str()).or_insert(0);
        tokens.push(format!("{REF}{}#{n}", c.name));
        *n += 1;
    }
    let target = |at: usize, label: &str| -> Option<usize> {
        let defs = by_label.get(label)?;
        defs.iter()
            .rev()
            .find(|&&j| j < at)
            .or_else(|| defs.iter().find(|&&j| j > at))
            .copied()
    };
    fn value(v: &Value, at: usize, target: &dyn Fn(usize, &str) -> Option<usize>, tokens: &[String]) -> Value {
        if let Some(label) = as_label_ref(v) {
            return target(at, label).map_or_else(|| v.clone(), |j| Value::String(tokens[j].clone()));
        }
        match v {
            Value::Array(items) => Value::Array(items.iter().map(|x| value(x, at, target, tokens)).collect()),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), value(x, at, target, tokens)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    (setup.len()..all.len())
        .map(|i| Call {
            name: all[i].name.clone(),
            arguments: all[i]
                .arguments
                .iter()
                .map(|(k, v)| (k.clone(), value(v, i, &target, &tokens)))
                .collect(),
            label: all[i].label.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value, label: &str) -> Call {
        Call {
            name: name.into(),
            arguments: args.as_object().unwrap().clone(),
            label: label.into(),
        }
    }

    #[test]
    fn renamed_labels_resolve_to_the_same_tokens() {
        let setup = [call(
            "initialize_active_data",
            json!({"t": "ship"}),
            "starting_table_var",
        )];
        let gold = [
            call(
                "filter_data",
                json!({"data_source": "$starting_table_var$", "value": "x"}),
                "FILTERED_DF_0",
            ),
            call(
                "aggregate_data",
                json!({"data_source": "$FILTERED_DF_0$", "keys": ["$FILTERED_DF_0$"]}),
                "COUNT",
            ),
        ];
        let renamed = [
            call(
                "filter_data",
                json!({"data_source": "$starting_table_var$", "value": "x"}),
                "OUT_0",
            ),
            call(
                "aggregate_data",
                json!({"data_source": "$OUT_0$", "keys": ["$OUT_0$"]}),
                "OUT_1",
            ),
        ];
        let (g, p) = (resolve(&setup, &gold), resolve(&setup, &renamed));
        assert_eq!(g[1].arguments, p[1].arguments);
        assert_ne!(g[1].arguments["data_source"], json!("$FILTERED_DF_0$"));
        // A reference to a different call is different (the setup table instead of the filter);
        // a wrong value of the referenced call is not the reference's error; an undefined label
        // stays literal.
        let other = [
            call(
                "filter_data",
                json!({"data_source": "$starting_table_var$", "value": "y"}),
                "OUT_0",
            ),
            call(
                "aggregate_data",
                json!({"data_source": "$starting_table_var$", "keys": ["$OUT_0$", "$NOPE$"]}),
                "OUT_1",
            ),
        ];
        let o = resolve(&setup, &other);
        assert_ne!(o[1].arguments["data_source"], g[1].arguments["data_source"]);
        assert_eq!(o[1].arguments["keys"][0], g[1].arguments["keys"][0]);
        assert_eq!(o[1].arguments["keys"][1], json!("$NOPE$"));
    }

    #[test]
    fn forward_references_point_to_the_later_call() {
        let swapped = [
            call("aggregate_data", json!({"data_source": "$A$"}), "B"),
            call("filter_data", json!({"data_source": "$B$"}), "A"),
        ];
        let r = resolve(&[], &swapped);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].arguments["data_source"], json!(format!("{REF}filter_data#0")));
        assert_eq!(r[1].arguments["data_source"], json!(format!("{REF}aggregate_data#0")));
    }
}
