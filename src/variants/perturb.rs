//! `perturb`: deterministic request perturbations from the DynamicToolBench catalogue (case
//! mixing, punctuation noise, distractor narrative), kept only when they preserve every gold
//! argument value (the Robustness paper's rule for meaning-preserving rephrasings).
//!
//! What is preserved ([`preserves_values`]): let V be the texts of the gold argument values
//! ([`super::gold_value_texts`]) that occur in the original request, compared
//! case-insensitively. A perturbed request is kept only if every value of V still occurs in it:
//!
//! - for `case`, case-insensitively (case mixing changes case by design; what is kept is the
//!   character sequence);
//! - for `punctuation` and `narrative`, with the same case sensitivity it had in the original:
//!   a value that occurred verbatim must still occur verbatim; a value that only occurred up to
//!   case must still occur up to case.
//!
//! Rejection reasons: `value_lost` (a value of V no longer occurs), `unchanged` (the
//! perturbation produced the original text, e.g. upper-casing an upper-case request).

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

/// Case mixing.
pub fn mix_case(text: &str, mode: CaseMode, rng: &mut Rng) -> String {
    match mode {
        CaseMode::Upper => text.to_uppercase(),
        CaseMode::Lower => text.to_lowercase(),
        CaseMode::Random => text
            .chars()
            .map(|c| {
                if c.is_alphabetic() && rng.chance(0.5) {
                    if c.is_uppercase() {
                        c.to_lowercase().collect::<String>()
                    } else {
                        c.to_uppercase().collect()
                    }
                } else {
                    c.to_string()
                }
            })
            .collect(),
    }
}

const PUNCT: [char; 8] = ['.', ',', '?', '!', ';', ':', '\'', '"'];

/// Punctuation noise: 1–3 edits, each one of: insert extra punctuation after a word, delete one
/// punctuation character, replace a space by a line break, repeat the final punctuation.
/// Returns the text and the edits made (e.g. `insert ','`).
pub fn punctuation_noise(text: &str, rng: &mut Rng) -> (String, Vec<String>) {
    let mut chars: Vec<char> = text.chars().collect();
    let mut edits = Vec::new();
    let n = 1 + rng.below(3);
    for _ in 0..n {
        let spaces: Vec<usize> = (0..chars.len()).filter(|&i| chars[i] == ' ').collect();
        let puncts: Vec<usize> = (0..chars.len()).filter(|&i| PUNCT.contains(&chars[i])).collect();
        match rng.below(4) {
            0 if !spaces.is_empty() => {
                let at = spaces[rng.below(spaces.len())];
                let p = [",", "!", "?", ";", "...", " -"][rng.below(6)];
                for (k, c) in p.chars().enumerate() {
                    chars.insert(at + k, c);
                }
                edits.push(format!("insert {p:?}"));
            }
            1 if !puncts.is_empty() => {
                let at = puncts[rng.below(puncts.len())];
                let c = chars.remove(at);
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

/// The value-preservation check (module docs): `Err(value)` names the first lost value.
pub fn preserves_values(original: &str, perturbed: &str, values: &[String], case_mixed: bool) -> Result<(), String> {
    let (ol, pl) = (original.to_lowercase(), perturbed.to_lowercase());
    for v in values {
        let vl = v.to_lowercase();
        if !ol.contains(&vl) {
            continue;
        }
        let verbatim = original.contains(v.as_str());
        let kept = if case_mixed || !verbatim {
            pl.contains(&vl)
        } else {
            perturbed.contains(v.as_str())
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
    let (text, detail) = match kind {
        "case" => {
            let mode = [CaseMode::Upper, CaseMode::Lower, CaseMode::Random][rng.below(3)];
            (
                mix_case(&e.input, mode, &mut rng),
                json!({"perturbation": "case", "mode": format!("{mode:?}").to_lowercase()}),
            )
        }
        "punctuation" => {
            let (t, edits) = punctuation_noise(&e.input, &mut rng);
            (t, json!({"perturbation": "punctuation", "edits": edits}))
        }
        _ => (narrative(&e.input, &mut rng), json!({"perturbation": "narrative"})),
    };
    if text == e.input {
        return Err("unchanged".into());
    }
    let values = gold_value_texts(&e.output);
    if preserves_values(&e.input, &text, &values, kind == "case").is_err() {
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
    fn case_mixing_keeps_values_up_to_case() {
        let mut rng = Rng::new(1, &["t"]);
        let t = mix_case("Singers from France?", CaseMode::Random, &mut rng);
        assert_eq!(t.to_lowercase(), "singers from france?");
        assert!(preserves_values("Singers from France?", &t, &["France".into()], true).is_ok());
        assert!(preserves_values("Singers from France?", &t.to_uppercase(), &["France".into()], true).is_ok());
    }

    #[test]
    fn punctuation_loss_inside_a_value_is_rejected() {
        let orig = "Which teams play in St. Louis?";
        assert!(preserves_values(orig, "Which teams play in St Louis?", &["St. Louis".into()], false).is_err());
        assert!(preserves_values(orig, "Which teams play in St.\nLouis?", &["St. Louis".into()], false).is_err());
        assert!(preserves_values(orig, "Which teams, play in St. Louis??", &["St. Louis".into()], false).is_ok());
        // values not in the original request are not checked
        assert!(preserves_values(orig, "x", &["equal_to".into()], false).is_ok());
        // a value that occurred verbatim must stay verbatim outside case mixing
        assert!(preserves_values("in France", "in FRANCE", &["France".into()], false).is_err());
    }

    #[test]
    fn noise_and_narrative_are_seeded() {
        let a = punctuation_noise("How many singers are there?", &mut Rng::new(3, &["x"]));
        let b = punctuation_noise("How many singers are there?", &mut Rng::new(3, &["x"]));
        assert_eq!(a, b);
        assert!(!a.1.is_empty());
        let n = narrative("How many?", &mut Rng::new(3, &["y"]));
        assert!(n.ends_with(" How many?") && NARRATIVES.iter().any(|p| n.starts_with(p)));
    }
}
