//! `$label$` references compared by the call they point to (alpha-equivalence).
//!
//! A label is the name a sequence gives an earlier call's output (`FILTERED_DF_0`); an argument
//! `"$FILTERED_DF_0$"` is a reference to that call. The model is never shown the gold's label
//! names, so two sequences that differ only in a consistent renaming of their labels are the same
//! program and must score the same on every metric. [`resolve`] rewrites every reference (a whole
//! string argument `$L$`, also inside arrays and objects) into a token that *is* the call it
//! points to: the referenced call's name and its arguments, themselves resolved, recursively down
//! to the setup steps (a let-bound variable replaced by its definition, which is what
//! alpha-equivalence compares). Two references are then equal under [`super::value_eq`] exactly
//! when they point to the same computation in the two sequences, whatever the labels and
//! wherever the calls stand. A consequence: a wrong argument of a referenced call makes every
//! reference to it differ too (the reference points to a different computation).
//!
//! Which call a reference points to (its binding): the setup steps come first (their labels,
//! such as `starting_table_var`, are the framework's), then the calls in order; a reference in
//! call `i` points to the latest call *before* `i` with that label, as execution binds it. A
//! label no earlier call defines — the referenced call was dropped from the prediction, or comes
//! only later (a reordered prediction) — is free: it stays the literal string, which matches
//! nothing but the same literal (a reference to a missing call matches nothing).

use std::collections::HashMap;

use serde_json::Value;

use crate::tools::{Call, as_label_ref};

/// Marks a resolved reference token; a control character no tool argument carries.
const REF: char = '\u{1}';

/// Whether `v` is a reference: a token [`resolve`] wrote, or a `$label$` no call defines.
pub fn is_reference(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.starts_with(REF)) || as_label_ref(v).is_some()
}

/// `v` with every `$label$` bound in `bound` (label → the token of the call it names) replaced
/// by that token, also inside arrays and objects; free labels kept literal.
fn substitute(v: &Value, bound: &HashMap<&str, String>) -> Value {
    if let Some(label) = as_label_ref(v) {
        return bound.get(label).map_or_else(|| v.clone(), |t| Value::String(t.clone()));
    }
    match v {
        Value::Array(items) => Value::Array(items.iter().map(|x| substitute(x, bound)).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), substitute(x, bound))).collect()),
        other => other.clone(),
    }
}

/// `calls` with every `$label$` reference replaced by the token of the call it points to
/// (module docs); `setup` are the framework's steps run before them (their labels resolvable,
/// themselves not returned). Names and labels are kept.
pub fn resolve(setup: &[Call], calls: &[Call]) -> Vec<Call> {
    // Label → token of the latest call so far that carries it.
    let mut bound: HashMap<&str, String> = HashMap::new();
    let mut out = Vec::with_capacity(calls.len());
    for (i, c) in setup.iter().chain(calls).enumerate() {
        let arguments: serde_json::Map<String, Value> = c
            .arguments
            .iter()
            .map(|(k, v)| (k.clone(), substitute(v, &bound)))
            .collect();
        if !c.label.is_empty() {
            let token = format!(
                "{REF}{}({})",
                c.name,
                super::canonical(&Value::Object(arguments.clone()))
            );
            bound.insert(c.label.as_str(), token);
        }
        if i >= setup.len() {
            out.push(Call {
                name: c.name.clone(),
                arguments,
                label: c.label.clone(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::metrics::Prf;
    use crate::eval::metrics::blend::parameter_prf;
    use serde_json::json;

    fn call(name: &str, args: Value, label: &str) -> Call {
        Call {
            name: name.into(),
            arguments: args.as_object().unwrap().clone(),
            label: label.into(),
        }
    }

    fn setup() -> [Call; 1] {
        [call(
            "initialize_active_data",
            json!({"t": "ship"}),
            "starting_table_var",
        )]
    }

    #[test]
    fn renamed_labels_resolve_to_the_same_tokens() {
        let setup = setup();
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
        // a reference to a call with another argument points to another computation; an
        // undefined label stays literal.
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
        assert_ne!(o[1].arguments["keys"][0], g[1].arguments["keys"][0]);
        assert_eq!(o[1].arguments["keys"][1], json!("$NOPE$"));
    }

    /// Reversed calls: each reference names a label only a *later* call defines, so it is free
    /// (execution has nothing bound to it yet) and stays literal.
    #[test]
    fn references_bind_to_earlier_calls_only() {
        let swapped = [
            call("aggregate_data", json!({"data_source": "$A$"}), "B"),
            call("filter_data", json!({"data_source": "$B$"}), "A"),
        ];
        let r = resolve(&[], &swapped);
        assert_eq!(r[0].arguments["data_source"], json!("$A$"));
        assert_eq!(
            r[1].arguments["data_source"],
            json!(format!("{REF}aggregate_data({{\"data_source\":\"$A$\"}})"))
        );
    }

    fn filter(value: &str, source: &str, label: &str) -> Call {
        call(
            "filter_data",
            json!({"data_source": source, "key_name": "k", "value": value}),
            label,
        )
    }

    fn count(source: &str) -> Call {
        call(
            "aggregate_data",
            json!({"data_source": source, "aggregation_type": "count"}),
            "C",
        )
    }

    /// Gold: filter x (F0) on the table, filter y (F1) on F0, count F1; the prediction drops the
    /// first filter. Gold pairs (8): (data_source, table) (key_name, k) (value, x)
    /// (data_source, ⟦F0⟧) (key_name, k) (value, y) (data_source, ⟦F1⟧) (aggregation_type,
    /// count). Predicted (5): (data_source, `$F0$`: free) (key_name, k) (value, y)
    /// (data_source, ⟦filter y on `$F0$`⟧) (aggregation_type, count). The count's source is not
    /// gold's ⟦F1⟧ (its filter reads a missing call), so tp = 3: P = 3/5, R = 3/8. Resolving by
    /// the occurrence among same-named calls made the predicted count's source "filter_data
    /// #0", equal to gold filter y's source, and credited it (tp = 4).
    #[test]
    fn reference_to_a_dropped_call_matches_nothing() {
        let setup = setup();
        let gold = [
            filter("x", "$starting_table_var$", "F0"),
            filter("y", "$F0$", "F1"),
            count("$F1$"),
        ];
        let pred = &gold[1..];
        let (g, p) = (resolve(&setup, &gold), resolve(&setup, pred));
        assert_eq!(p[0].arguments["data_source"], json!("$F0$"));
        assert_eq!(parameter_prf(&g, &p), Prf::from_counts(3, 5, 8));
    }

    /// Gold: filter x (F0) and filter y (F1) both on the table, count F1; the prediction drops
    /// filter x. Its count still reads the same computation (filter y on the table), so its
    /// source matches gold's: tp = 5 of 5 predicted and 8 gold pairs. Resolving by position
    /// among same-named calls made it "filter_data #0" against gold's "#1" and lost it.
    #[test]
    fn reference_to_a_kept_call_matches_after_an_earlier_call_is_dropped() {
        let setup = setup();
        let gold = [
            filter("x", "$starting_table_var$", "F0"),
            filter("y", "$starting_table_var$", "F1"),
            count("$F1$"),
        ];
        let pred = &gold[1..];
        let (g, p) = (resolve(&setup, &gold), resolve(&setup, pred));
        assert_eq!(p[1].arguments["data_source"], g[2].arguments["data_source"]);
        assert_eq!(parameter_prf(&g, &p), Prf::from_counts(5, 5, 8));
    }
}
