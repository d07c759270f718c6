//! `paraphrase`: N meaning-preserving rephrasings per request from an LLM ([`crate::llm`]),
//! kept only when they pass [`check`] (the Robustness paper's rule, as for `perturb`).
//!
//! The prompt is `templates/paraphrase.j2` (few-shot chat turns; `### <role>` lines split it into
//! messages). Candidate `i` of an example is one chat request with seed `llm.seed + i`; all
//! requests and answers are cached in the store (`llm-chat` entries), so a rebuild is offline.
//!
//! The answer is cleaned ([`clean`]: first non-empty line, a leading `Rewrite:`-style label and
//! wrapping quotes removed), then [`check`]ed. Rejection reasons, first failing wins:
//!
//! | reason          | the candidate …                                                        |
//! |-----------------|------------------------------------------------------------------------|
//! | `empty`         | is empty after cleaning                                                |
//! | `unchanged`     | equals the original up to case, spacing and final punctuation          |
//! | `value_lost`    | lacks a gold argument value that occurs in the original ([`super::perturb::preserves_values`], verbatim if it was verbatim) |
//! | `added_number`  | has a digit sequence that the original does not have                   |
//! | `answer`        | answers instead of asking (`the answer is`, `answer:`, starts with yes/no/sure/here or a number) |
//! | `not_a_request` | neither ends with `?` nor starts with a question word or an imperative |
//! | `duplicate`     | repeats an accepted candidate of the same example                      |
//! | `llm_error:<code>` | was never received: the request failed after retries            |
//!
//! Accounting: `attempted = accepted + rejected` (every request is one attempt). The quality
//! report is `stats.paraphrase` (counts, acceptance rate, rejections by reason) and
//! `report/paraphrase.json` (every accepted and rejected candidate with its reason).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::perturb::preserves_values;
use super::{ParaphraseConfig, gold_value_texts, is_variant, variant_row};
use crate::dataset::{Build, Example};
use crate::llm::{self, Completion, Llm, LlmConfig, LlmError, Message};
use crate::store::Store;

/// The prompt template.
pub const TEMPLATE: &str = include_str!("../../templates/paraphrase.j2");

/// The chat messages of the prompt for `request`.
pub fn prompt(request: &str) -> Vec<Message> {
    llm::render_chat("paraphrase.j2", TEMPLATE, minijinja::context! { request => request })
}

const LABELS: [&str; 9] = [
    "rewrite",
    "rewritten",
    "rewritten request",
    "paraphrase",
    "paraphrased",
    "rephrased",
    "rephrased request",
    "request",
    "answer",
];

/// The candidate request in a raw answer: first non-empty line, without a leading label such as
/// `Rewrite:` and without wrapping quotes.
pub fn clean(raw: &str) -> String {
    let mut t = raw
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string();
    if let Some((head, rest)) = t.split_once(':') {
        if LABELS.contains(&head.trim().to_lowercase().as_str()) {
            t = rest.trim().to_string();
        }
    }
    for (a, b) in [('"', '"'), ('\'', '\''), ('“', '”')] {
        if t.len() >= 2 && t.starts_with(a) && t.ends_with(b) {
            t = t[a.len_utf8()..t.len() - b.len_utf8()].trim().to_string();
        }
    }
    t
}

fn normalise(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
        .trim_end_matches(|c: char| c.is_ascii_punctuation())
        .to_string()
}

fn digit_runs(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            cur.push(c);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

const REQUEST_STARTS: [&str; 58] = [
    "what",
    "which",
    "who",
    "whom",
    "whose",
    "when",
    "where",
    "why",
    "how",
    "list",
    "show",
    "give",
    "find",
    "tell",
    "return",
    "get",
    "count",
    "name",
    "display",
    "provide",
    "retrieve",
    "compute",
    "calculate",
    "determine",
    "identify",
    "select",
    "please",
    "can",
    "could",
    "would",
    "will",
    "is",
    "are",
    "was",
    "were",
    "do",
    "does",
    "did",
    "i",
    "i'd",
    "i'm",
    "we",
    "let",
    "let's",
    "fetch",
    "report",
    "sort",
    "order",
    "enumerate",
    "describe",
    "locate",
    "output",
    "print",
    "look",
    "search",
    "check",
    "in",
    "for",
];

/// Whether `text` reads as a request: ends with `?` or starts with a question word or an
/// imperative (`REQUEST_STARTS`).
pub fn is_request(text: &str) -> bool {
    if text.trim_end().ends_with('?') {
        return true;
    }
    let first = text
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
        .to_lowercase();
    REQUEST_STARTS.contains(&first.as_str())
}

/// Whether `text` is an answer rather than a request (`the answer is`, `answer:`, or it starts
/// with yes, no, sure, here, or a number).
pub fn is_answer(text: &str) -> bool {
    let l = text.trim().to_lowercase();
    let first = l
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_string();
    l.contains("the answer is")
        || l.contains("answer:")
        || l.starts_with("answer")
        || ["yes", "no", "sure", "here", "certainly", "okay", "ok"].contains(&first.as_str())
        || first.chars().next().is_some_and(|c| c.is_ascii_digit())
}

/// The acceptance check (module docs): `Err(reason)` for the first failing rule.
pub fn check(original: &str, candidate: &str, values: &[String]) -> Result<(), &'static str> {
    if candidate.trim().is_empty() {
        return Err("empty");
    }
    if normalise(original) == normalise(candidate) {
        return Err("unchanged");
    }
    if preserves_values(original, candidate, values).is_err() {
        return Err("value_lost");
    }
    let orig_numbers = digit_runs(original);
    if digit_runs(candidate).iter().any(|d| !orig_numbers.contains(d)) {
        return Err("added_number");
    }
    if is_answer(candidate) {
        return Err("answer");
    }
    if !is_request(candidate) {
        return Err("not_a_request");
    }
    Ok(())
}

/// The examples paraphrased: group order, then example order; originals only; at most
/// `max_examples`. `(group, index in the group)`.
fn parents(build: &Build, cfg: &ParaphraseConfig) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (g, o) in &build.groups {
        for (i, e) in o.examples.iter().enumerate() {
            if !is_variant(e) {
                out.push((g.clone(), i));
            }
        }
    }
    if let Some(m) = cfg.max_examples {
        out.truncate(m);
    }
    out
}

/// Puts paraphrase `rows` of group `g` (each with its parent's index in the group's examples)
/// into the group: each right after the run of the compile item holding its parent
/// ([`Build::insert_after_runs`]: a question batch's later rows stay in the batch's unit, which
/// one round-two shard computes whole, issue 34); at the group's end when it has no item runs.
fn place_rows(build: &mut Build, g: &str, rows: Vec<(usize, Example)>) {
    let runs: Vec<std::ops::Range<usize>> = build
        .item_runs(g)
        .map(|runs| runs.into_iter().map(|(_, range)| range).collect())
        .unwrap_or_default();
    let placed = rows
        .into_iter()
        .map(|(parent, row)| {
            let k = runs.iter().position(|r| r.contains(&parent));
            (k.or(runs.len().checked_sub(1)), vec![row])
        })
        .collect();
    build.insert_after_runs(g, placed);
}

/// Runs the paraphrase operator over `build` (after [`super::apply`]): stats `llm`, `llm_run`
/// (run counters: requests made, cache hits, retries — printed, not emitted), `paraphrase`
/// (the quality report), `report/paraphrase.json`, rows put in their parent's group
/// ([`place_rows`]).
pub fn apply(build: &mut Build, cfg: &ParaphraseConfig, llm_cfg: Option<&LlmConfig>, store: &Store) {
    let default = LlmConfig::default();
    let llm_cfg = llm_cfg.unwrap_or(&default);
    let resolved = match llm::resolve(llm_cfg) {
        Ok(r) => r,
        Err(u) => {
            // One line, no `paraphrase` report: nothing was attempted.
            build.stats.insert("llm".into(), json!(u.to_string()));
            return;
        }
    };
    let llm = Arc::new(Llm::new(resolved.clone(), store.clone()));
    let parents = parents(build, cfg);
    let seed0 = resolved.cfg.seed;
    // One job per (parent, candidate index).
    let mut jobs: Vec<(usize, usize, Vec<Message>)> = Vec::new();
    for (p, (g, i)) in parents.iter().enumerate() {
        let msgs = prompt(&build.groups[g].examples[*i].input);
        for k in 0..cfg.n {
            jobs.push((p, k, msgs.clone()));
        }
    }
    let results: Vec<Result<Completion, LlmError>> = llm::chat_all(
        llm.clone(),
        jobs.iter()
            .map(|(_, k, msgs)| (msgs.clone(), seed0 + *k as u64))
            .collect(),
    );

    let mut by_reason: BTreeMap<String, usize> = BTreeMap::new();
    let mut rejected_list = Vec::new();
    let mut accepted_list = Vec::new();
    let mut new_rows: BTreeMap<String, Vec<(usize, Example)>> = BTreeMap::new();
    let mut first_error: Option<String> = None;
    let mut accepted_texts: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for ((p, k, _), res) in jobs.iter().zip(&results) {
        let (g, i) = &parents[*p];
        let e = &build.groups[g].examples[*i];
        let (raw, verdict) = match res {
            Err(err) => {
                first_error.get_or_insert_with(|| err.to_string());
                (None, Err(format!("llm_error:{}", err.code)))
            }
            Ok(c) => {
                let cand = clean(&c.text);
                let values = gold_value_texts(&e.output);
                let seen = accepted_texts.entry(*p).or_default();
                let v = match check(&e.input, &cand, &values) {
                    Err(r) => Err(r.to_string()),
                    Ok(()) if seen.iter().any(|s| normalise(s) == normalise(&cand)) => Err("duplicate".into()),
                    Ok(()) => {
                        seen.push(cand.clone());
                        Ok(cand)
                    }
                };
                (Some(c.text.clone()), v)
            }
        };
        match verdict {
            Ok(cand) => {
                let detail = json!({
                    "original_input": e.input,
                    "model": resolved.model,
                    "seed": seed0 + *k as u64,
                    "temperature": resolved.cfg.temperature,
                    "raw": raw,
                });
                let mut row = variant_row(e, &format!("paraphrase-{k}"), "paraphrase", detail);
                row.input = cand.clone();
                accepted_list.push(json!({"id": row.id, "variant_of": e.id, "input": cand}));
                new_rows.entry(g.clone()).or_default().push((*i, row));
            }
            Err(reason) => {
                *by_reason.entry(reason.clone()).or_insert(0) += 1;
                rejected_list.push(json!({
                    "variant_of": e.id,
                    "candidate": k,
                    "reason": reason,
                    "original_input": e.input,
                    "raw": raw,
                }));
            }
        }
    }
    let attempted = jobs.len();
    let accepted = accepted_list.len();
    let rejected = rejected_list.len();
    debug_assert_eq!(attempted, accepted + rejected);
    for (g, rows) in new_rows {
        place_rows(build, &g, rows);
    }

    let (requests, hits, retries, failures) = llm.counters.snapshot();
    let llm_line = match &first_error {
        Some(err) if failures == attempted => format!(
            "error: every request to {} failed ({err}); no paraphrases",
            resolved.base_url
        ),
        Some(err) => format!(
            "model {} at {}: {failures} of {attempted} requests failed, first: {err}",
            resolved.model, resolved.base_url
        ),
        None => format!(
            "model {} at {}: {attempted} requests",
            resolved.model, resolved.base_url
        ),
    };
    build.stats.insert("llm".into(), json!(llm_line));
    build.stats.insert(
        "llm_run".into(),
        json!({
            "http_requests": requests,
            "retries": retries,
            "failed": failures,
            "from_store": hits,
            "batches": llm.counters.batches.load(std::sync::atomic::Ordering::Relaxed),
            "batch_requests": llm.counters.batch_lines.load(std::sync::atomic::Ordering::Relaxed),
        }),
    );
    let rate = if attempted == 0 {
        0.0
    } else {
        (1000.0 * accepted as f64 / attempted as f64).round() / 10.0
    };
    build.stats.insert(
        "paraphrase".into(),
        json!({
            "examples": parents.len(),
            "per_example": cfg.n,
            "attempted": attempted,
            "accepted": accepted,
            "rejected": rejected,
            "acceptance_rate_percent": rate,
            "rejected_by_reason": by_reason,
        }),
    );
    if let Some(Value::Object(v)) = build.stats.get_mut("variants") {
        if let Some(Value::Object(rows)) = v.get_mut("rows") {
            rows.insert("paraphrase".into(), json!(accepted));
        }
    }
    let report = json!({
        "model": resolved.model,
        "template": "templates/paraphrase.j2",
        "attempted": attempted,
        "accepted": accepted_list,
        "rejected": rejected_list,
    });
    let mut bytes = serde_json::to_vec_pretty(&report).expect("serialisable");
    bytes.push(b'\n');
    // The outputs depend on the answers, which the recipe does not pin: fold them into the key
    // so a build whose answers changed (e.g. after failures) is not taken as up to date.
    build.fold_into_key(&bytes);
    build.extra_files.insert("report/paraphrase.json".into(), bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_has_few_shot_turns_and_the_request_last() {
        let m = prompt("How many heads are older than 56?");
        assert_eq!(m[0].role, "system");
        assert!(m.len() >= 4 && m.iter().any(|x| x.role == "assistant"));
        let last = m.last().unwrap();
        assert_eq!(last.role, "user");
        assert_eq!(last.content, "Rewrite: How many heads are older than 56?");
    }

    #[test]
    fn recipe_tables() {
        let v: super::super::VariantsConfig = toml::from_str(
            "[paraphrase]\nmax_examples = 5\n[llm]\nbase_url = \"http://127.0.0.1:1/v1\"\nrequests_per_second = 2.0\n",
        )
        .unwrap();
        assert_eq!(v.paraphrase.as_ref().unwrap().n, 3);
        assert_eq!(v.paraphrase.as_ref().unwrap().max_examples, Some(5));
        assert_eq!(v.llm.as_ref().unwrap().max_concurrency, 4);
        assert!(v.validate().is_ok());
        let bad: super::super::VariantsConfig = toml::from_str("[llm]\nmax_concurrency = 0\n").unwrap();
        assert!(bad.validate().unwrap_err().contains("max_concurrency"));
        assert!(toml::from_str::<super::super::VariantsConfig>("[llm]\napi_key = \"sk\"\n").is_err());
        // An absent section does not change the serialised config (existing build keys).
        let empty = serde_json::to_value(super::super::VariantsConfig::default()).unwrap();
        assert!(empty.get("paraphrase").is_none() && empty.get("llm").is_none());
    }

    #[test]
    fn cleaning() {
        assert_eq!(clean("\n  Rewrite: \"List the singers.\"\nmore"), "List the singers.");
        assert_eq!(clean("What is it?"), "What is it?");
    }

    #[test]
    fn checks_and_reasons() {
        let o = "How many heads of the departments are older than 56?";
        let v = vec!["56".to_string(), "head".to_string()];
        assert_eq!(
            check(o, "What is the number of department heads older than 56?", &v),
            Ok(())
        );
        assert_eq!(
            check(o, "how many heads of the departments are older than 56", &v),
            Err("unchanged")
        );
        assert_eq!(check(o, "Count the heads aged over fifty-six.", &v), Err("value_lost"));
        assert_eq!(
            check(o, "How many heads older than 56 are in the 10 departments?", &v),
            Err("added_number")
        );
        assert_eq!(check(o, "The answer is heads older than 56.", &v), Err("answer"));
        assert_eq!(check(o, "The heads older than 56 are many.", &v), Err("not_a_request"));
        assert_eq!(check(o, "", &v), Err("empty"));
        assert_eq!(
            check(o, "Correct answer: how many heads are older than 56?", &v),
            Err("answer")
        );
        assert_eq!(check(o, "List every head older than 56.", &v), Ok(()));
    }
}
