//! `perturb`: deterministic request perturbations from the DynamicToolBench catalogue (case
//! mixing, punctuation noise, distractor narrative) that never touch an argument value (the
//! Robustness paper's rule: perturbations preserve every parameter value; DESIGN.md "never
//! touching a span that is an argument value").
//!
//! **Protected spans** ([`value_spans`], [`protected_chars`]): every occurrence of the text of a
//! gold argument value ([`super::gold_value_texts`]: SLOT/SEL filter values and limits, numbers
//! in their text forms, REST query parameters, seq slot values) in the original request, matched
//! up to ASCII case, so both the value as the gold spells it and as the request spells it
//! ("france" for the gold's "France") are kept letter for letter. Case mixing changes
//! only letters outside them; punctuation noise inserts, deletes and breaks lines only outside
//! them (an insertion at a span's edge leaves the span whole); the narrative is a prefix. So a
//! value that occurs verbatim in the request still occurs verbatim after any perturbation
//! (Spider compares text case-sensitively: "Sky Radio" must not become "SKy rAdio").
//!
//! The check ([`preserves_values`]) stays as a guard: every occurrence of a value, spelled as the
//! request spelled it, must still occur verbatim.
//!
//! Rejection reasons: `value_lost` (a value no longer occurs), `unchanged` (the perturbation
//! produced the original text, e.g. upper-casing a request that is all upper case or all value).

use serde_json::json;

use super::{Rng, gold_value_texts, variant_row};
use crate::dataset::Example;

/// Distractor narratives put before the request: irrelevant context a user might add. They
/// hold no digits and no quotes, so they cannot supply a lost value.
pub const NARRATIVES: [&str; 10] = [
    "I was chatting with a colleague over coffee this morning and we ended up arguing about something.",
    "My manager asked me to put together a short summary before the weekly meeting, so here goes.",
    "It has been a long day and the printer on our floor is broken again, but I still need this.",
    "A friend of mine collects odd facts and challenged me with a question yesterday.",
    "Before I forget, and sorry if this sounds random, there is one thing I need to look up.",
    "We are redecorating the office and everyone is distracted, so I am taking care of the reports.",
    "My cousin is visiting next week and keeps asking me questions I cannot answer offhand.",
    "I just got back from lunch, the weather is lovely, and my inbox is full of requests like this one.",
    "For a presentation I am preparing, which is honestly taking forever, I need a quick answer.",
    "Someone on the team mentioned this in passing and now I am curious.",
];

/// How `case` mixes the request: all upper, all lower, or random per letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseMode {
    /// `to_uppercase`.
    Upper,
    /// `to_lowercase`.
    Lower,
    /// Each letter's case flipped with probability 1/2.
    Random,
}

/// The byte ranges of `text` holding an occurrence of one of `values`, matched up to ASCII case
/// (module docs: the protected spans): the value as the gold spells it and as the request spells
/// it ("france" for the gold's "France"). Overlapping occurrences are all found.
pub fn value_spans(text: &str, values: &[String]) -> Vec<std::ops::Range<usize>> {
    // ASCII lower-casing keeps every byte offset.
    let folded = text.to_ascii_lowercase();
    let mut spans = Vec::new();
    for v in values.iter().filter(|v| !v.is_empty()) {
        let v = v.to_ascii_lowercase();
        let mut from = 0;
        while let Some(at) = folded[from..].find(v.as_str()) {
            let start = from + at;
            spans.push(start..start + v.len());
            from = start + folded[start..].chars().next().map_or(1, char::len_utf8);
        }
    }
    spans
}

/// Which characters of `text` (by char index) lie inside an occurrence of one of `values`
/// ([`value_spans`]: matched up to ASCII case, so the value stays as the request spells it).
pub fn protected_chars(text: &str, values: &[String]) -> Vec<bool> {
    let mut bytes = vec![false; text.len()];
    for span in value_spans(text, values) {
        bytes[span].iter_mut().for_each(|b| *b = true);
    }
    text.char_indices().map(|(i, _)| bytes[i]).collect()
}

/// Case mixing of the characters of `text` outside the protected ones (`protected[i]` for the
/// `i`-th char; missing entries are unprotected).
pub fn mix_case(text: &str, mode: CaseMode, protected: &[bool], rng: &mut Rng) -> String {
    text.chars()
        .enumerate()
        .map(|(i, c)| {
            if protected.get(i).copied().unwrap_or(false) || !c.is_alphabetic() {
                return c.to_string();
            }
            match mode {
                CaseMode::Upper => c.to_uppercase().collect(),
                CaseMode::Lower => c.to_lowercase().collect(),
                CaseMode::Random if rng.chance(0.5) => {
                    if c.is_uppercase() {
                        c.to_lowercase().collect::<String>()
                    } else {
                        c.to_uppercase().collect()
                    }
                }
                CaseMode::Random => c.to_string(),
            }
        })
        .collect()
}

const PUNCT: [char; 8] = ['.', ',', '?', '!', ';', ':', '\'', '"'];

/// Punctuation noise: 1–3 edits, each one of: insert extra punctuation after a word, delete one
/// punctuation character, replace a space by a line break, repeat the final punctuation. No edit
/// falls inside a protected char (`protected[i]` for the `i`-th char of `text`): an insertion
/// goes before an unprotected space, a deletion or line break replaces an unprotected char.
/// Returns the text and the edits made (e.g. `insert ','`).
pub fn punctuation_noise(text: &str, protected: &[bool], rng: &mut Rng) -> (String, Vec<String>) {
    let mut chars: Vec<char> = text.chars().collect();
    let mut guard: Vec<bool> = (0..chars.len())
        .map(|i| protected.get(i).copied().unwrap_or(false))
        .collect();
    let mut edits = Vec::new();
    let n = 1 + rng.below(3);
    for _ in 0..n {
        let spaces: Vec<usize> = (0..chars.len()).filter(|&i| chars[i] == ' ' && !guard[i]).collect();
        let puncts: Vec<usize> = (0..chars.len())
            .filter(|&i| PUNCT.contains(&chars[i]) && !guard[i])
            .collect();
        match rng.below(4) {
            0 if !spaces.is_empty() => {
                let at = spaces[rng.below(spaces.len())];
                let p = [",", "!", "?", ";", "...", " -"][rng.below(6)];
                for (k, c) in p.chars().enumerate() {
                    chars.insert(at + k, c);
                    guard.insert(at + k, false);
                }
                edits.push(format!("insert {p:?}"));
            }
            1 if !puncts.is_empty() => {
                let at = puncts[rng.below(puncts.len())];
                let c = chars.remove(at);
                guard.remove(at);
                edits.push(format!("delete {:?}", c.to_string()));
            }
            2 if !spaces.is_empty() => {
                let at = spaces[rng.below(spaces.len())];
                chars[at] = '\n';
                edits.push("line break".into());
            }
            _ => {
                let end = chars
                    .iter()
                    .rposition(|c| !c.is_whitespace())
                    .map(|i| i + 1)
                    .unwrap_or(0);
                let p = if end > 0 && PUNCT.contains(&chars[end - 1]) {
                    chars[end - 1]
                } else {
                    ['?', '!', '.'][rng.below(3)]
                };
                chars.insert(end, p);
                chars.insert(end, p);
                guard.insert(end, false);
                guard.insert(end, false);
                edits.push(format!("repeat {:?}", p.to_string()));
            }
        }
    }
    (chars.into_iter().collect(), edits)
}

/// The distractor narrative prefix: one of [`NARRATIVES`], a space, then the request.
pub fn narrative(text: &str, rng: &mut Rng) -> String {
    format!("{} {text}", NARRATIVES[rng.below(NARRATIVES.len())])
}

/// The value-preservation check (module docs; also the paraphrase filter's): a value that
/// occurs verbatim in `original` occurs verbatim in `perturbed`; one that occurs only up to ASCII
/// case ([`value_spans`]) occurs in `perturbed` as `original` spells it or as the gold does; one
/// found only up to Unicode case is still found so. `Err(value)` names the first lost value.
pub fn preserves_values(original: &str, perturbed: &str, values: &[String]) -> Result<(), String> {
    for v in values.iter().filter(|v| !v.is_empty()) {
        let kept = if original.contains(v.as_str()) {
            perturbed.contains(v.as_str())
        } else {
            let spans = value_spans(original, std::slice::from_ref(v));
            if spans.is_empty() {
                let vl = v.to_lowercase();
                !original.to_lowercase().contains(&vl) || perturbed.to_lowercase().contains(&vl)
            } else {
                perturbed.contains(v.as_str()) || spans.into_iter().any(|s| perturbed.contains(&original[s]))
            }
        };
        if !kept {
            return Err(v.clone());
        }
    }
    Ok(())
}

/// One perturbation variant of `e` (`kind` ∈ [`super::PERTURBATIONS`]), id `<parent>/perturb-<kind>`,
/// or the rejection reason (`value_lost`, `unchanged`).
pub fn variant(e: &Example, kind: &str, seed: u64) -> Result<Example, String> {
    let mut rng = Rng::new(seed, &["perturb", kind, &e.id]);
    let values = gold_value_texts(&e.output);
    let protected = protected_chars(&e.input, &values);
    let (text, detail) = match kind {
        "case" => {
            let mode = [CaseMode::Upper, CaseMode::Lower, CaseMode::Random][rng.below(3)];
            (
                mix_case(&e.input, mode, &protected, &mut rng),
                json!({"perturbation": "case", "mode": format!("{mode:?}").to_lowercase()}),
            )
        }
        "punctuation" => {
            let (t, edits) = punctuation_noise(&e.input, &protected, &mut rng);
            (t, json!({"perturbation": "punctuation", "edits": edits}))
        }
        _ => (narrative(&e.input, &mut rng), json!({"perturbation": "narrative"})),
    };
    if text == e.input {
        return Err("unchanged".into());
    }
    if preserves_values(&e.input, &text, &values).is_err() {
        return Err("value_lost".into());
    }
    let mut detail = detail;
    detail["original_input"] = json!(e.input);
    let mut row = variant_row(e, &format!("perturb-{kind}"), "perturb", detail);
    row.input = text;
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_mixing_leaves_value_spans_in_their_case() {
        let text = "Which stations play Sky Radio in France?";
        let values = vec!["Sky Radio".to_string(), "France".to_string()];
        let protected = protected_chars(text, &values);
        for seed in 0..20 {
            for mode in [CaseMode::Upper, CaseMode::Lower, CaseMode::Random] {
                let t = mix_case(text, mode, &protected, &mut Rng::new(seed, &["t"]));
                assert_eq!(t.to_lowercase(), text.to_lowercase());
                assert!(t.contains("Sky Radio") && t.contains("France"), "{t}");
            }
        }
        let upper = mix_case(text, CaseMode::Upper, &protected, &mut Rng::new(1, &["t"]));
        assert_eq!(upper, "WHICH STATIONS PLAY Sky Radio IN France?");
        assert!(preserves_values(text, &upper, &values).is_ok());
        // The old behaviour (the whole request mixed) loses the value's case.
        assert!(preserves_values(text, &text.to_uppercase(), &values).is_err());
    }

    /// Issue 30 item 2: a value the request spells in another case than the gold ("france" for
    /// "France") is kept as the request spells it; before, only the gold's spelling was
    /// protected and case mixing turned "france" into "FRANCE" or "fRaNce".
    #[test]
    fn case_mixing_keeps_a_value_as_the_request_spells_it_in_another_case() {
        let text = "which singers come from france, aged 32?";
        let values = vec!["France".to_string(), "32".to_string()];
        let protected = protected_chars(text, &values);
        for seed in 0..20 {
            for mode in [CaseMode::Upper, CaseMode::Random] {
                let t = mix_case(text, mode, &protected, &mut Rng::new(seed, &["t"]));
                assert!(t.contains("france") && t.contains("32"), "{t}");
                assert!(preserves_values(text, &t, &values).is_ok(), "{t}");
            }
        }
        assert!(preserves_values(text, &text.to_uppercase(), &values).is_err());
        assert!(preserves_values(text, &text.replace("france", "fRance"), &values).is_err());
    }

    #[test]
    fn punctuation_noise_never_edits_inside_a_value() {
        let text = "Which teams play in St. Louis, Mo. or New York?";
        let values = vec!["St. Louis, Mo.".to_string(), "New York".to_string()];
        let protected = protected_chars(text, &values);
        for seed in 0..200 {
            let (t, _) = punctuation_noise(text, &protected, &mut Rng::new(seed, &["p"]));
            assert!(
                t.contains("St. Louis, Mo.") && t.contains("New York"),
                "seed {seed}: {t:?}"
            );
        }
    }

    #[test]
    fn punctuation_loss_inside_a_value_is_rejected() {
        let orig = "Which teams play in St. Louis?";
        assert!(preserves_values(orig, "Which teams play in St Louis?", &["St. Louis".into()]).is_err());
        assert!(preserves_values(orig, "Which teams play in St.\nLouis?", &["St. Louis".into()]).is_err());
        assert!(preserves_values(orig, "Which teams, play in St. Louis??", &["St. Louis".into()]).is_ok());
        // values not in the original request are not checked
        assert!(preserves_values(orig, "x", &["equal_to".into()]).is_ok());
        // a value that occurred verbatim must stay verbatim
        assert!(preserves_values("in France", "in FRANCE", &["France".into()]).is_err());
    }

    #[test]
    fn noise_and_narrative_are_seeded() {
        let a = punctuation_noise("How many singers are there?", &[], &mut Rng::new(3, &["x"]));
        let b = punctuation_noise("How many singers are there?", &[], &mut Rng::new(3, &["x"]));
        assert_eq!(a, b);
        assert!(!a.1.is_empty());
        let n = narrative("How many?", &mut Rng::new(3, &["y"]));
        assert!(n.ends_with(" How many?") && NARRATIVES.iter().any(|p| n.starts_with(p)));
    }
}
