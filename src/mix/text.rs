//! The user text a mix compares: its normal form (de-duplication and decontamination) and its
//! word 13-grams (the overlap figure of the GPT-3 and Llama 2 reports).
//!
//! Normal form ([`normalise`]): lower case (Unicode), apostrophes removed (`what's` = `whats`),
//! every other character that is not a letter or a digit a word break, words joined by one
//! space. So case, punctuation and whitespace perturbations of a question — the `perturb`
//! variants' case mixing and punctuation noise among them — share one normal form, while any
//! changed, added or removed word makes another.

use std::collections::HashSet;

/// N of the n-gram overlap figure: 13 words, as GPT-3 (Brown et al. 2020, appendix C) and
/// Llama 2 (Touvron et al. 2023, §A.6) measure contamination.
pub const NGRAM: usize = 13;

/// The words of `text` in normal form (module docs).
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else if matches!(c, '\'' | '\u{2019}' | '\u{2018}' | '\u{02bc}' | '`') {
            // An apostrophe joins: `don't` and `dont` are one word.
        } else if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The normal form of `text`: its [`words`] joined by single spaces.
pub fn normalise(text: &str) -> String {
    words(text).join(" ")
}

/// A 13-gram's key: 64 bits of SipHash with fixed keys over its words (in memory only, never
/// written; collisions at 2^-64 per pair are negligible beside the counts reported).
fn gram_key(words: &[String]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    words.hash(&mut h);
    h.finish()
}

/// The keys of the word [`NGRAM`]-grams of `text` (none when it has fewer words).
pub fn grams(text: &str) -> impl Iterator<Item = u64> {
    let w = words(text);
    let n = w.len().saturating_sub(NGRAM - 1);
    (0..n)
        .map(move |i| gram_key(&w[i..i + NGRAM]))
        .collect::<Vec<_>>()
        .into_iter()
}

/// The evaluation side of the comparison: every evaluation text's normal form and 13-grams.
#[derive(Debug, Default)]
pub struct EvalIndex {
    texts: HashSet<String>,
    grams: HashSet<u64>,
}

impl EvalIndex {
    /// Adds one evaluation text.
    pub fn add(&mut self, text: &str) {
        let n = normalise(text);
        if n.is_empty() {
            return;
        }
        self.grams.extend(grams(text));
        self.texts.insert(n);
    }

    /// Whether the normal form `normal` is an evaluation text's.
    pub fn contains(&self, normal: &str) -> bool {
        self.texts.contains(normal)
    }

    /// Whether `text` shares a word 13-gram with an evaluation text; `None` when it has fewer
    /// than 13 words (no 13-gram to compare).
    pub fn overlaps(&self, text: &str) -> Option<bool> {
        let mut any = None;
        for g in grams(text) {
            if self.grams.contains(&g) {
                return Some(true);
            }
            any = Some(false);
        }
        any
    }

    /// Distinct evaluation texts (normal forms).
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// Whether no evaluation text was added.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_form_ignores_case_punctuation_and_whitespace() {
        let a = normalise("How many singers do we have?");
        assert_eq!(a, "how many singers do we have");
        assert_eq!(normalise("  HOW many   singers, do we have?!"), a);
        assert_eq!(normalise("What's the flight?"), normalise("whats the FLIGHT"));
        assert_eq!(normalise("Paris,France"), normalise("Paris, France"));
        assert_ne!(
            normalise("How many singers do we have"),
            normalise("How many singers we have")
        );
        assert_eq!(normalise("Ünïcode ÄB"), "ünïcode äb");
    }

    #[test]
    fn thirteen_grams_overlap_only_on_thirteen_shared_words() {
        let mut idx = EvalIndex::default();
        idx.add("one two three four five six seven eight nine ten eleven twelve thirteen fourteen");
        assert_eq!(idx.overlaps("short text"), None);
        assert_eq!(
            idx.overlaps("zero ONE two three four five six seven eight nine ten eleven twelve thirteen!"),
            Some(true)
        );
        assert_eq!(
            idx.overlaps("one two three four five six seven eight nine ten eleven twelve fourteen"),
            Some(false)
        );
    }
}
