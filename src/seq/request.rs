//! SeqSGD / SeqMultiWOZ requests written by an LLM (API-BLEND §3.1): the gold calls of a row are
//! shown to the model, which writes the one request a user would make for them
//! (`templates/seq-request.j2`, few-shot). Every request and answer is cached in the store
//! ([`crate::llm`]), so a rebuild is offline and byte-identical.
//!
//! # The value check ([`check`])
//!
//! An answer is accepted only when every string argument value of every gold call is in it
//! (case-insensitive, whitespace collapsed: [`crate::tools::check::normalise`]) or one of these
//! documented canonical forms of a span that is:
//!
//! | value | accepted span |
//! |---|---|
//! | SGD canonical value with a user surface form (`meta.surface_forms`: `11:30` ← "half past 11 in the morning") | the surface form |
//! | a number `1`–`10` | its English word (`2` ← "two") |
//! | a time `HH:MM` | `H:MM`, `H am/pm`, `H:MM am/pm` (`18:00` ← "6 pm", `09:30` ← "9:30") |
//! | `True` / `False` (SGD boolean slots) | the slot's words minus `is`/`has` (`has_live_music` ← "live music") |
//! | `yes` / `no` / `free` (MultiWOZ `parking`, `internet`) | "parking", "internet" or "wifi" |
//! | `dontcare` | always (the user does not mind) |
//!
//! Rejection reasons (counted in `stats.request_writer.rejected_by_reason`; the row then keeps
//! its template request): `empty`, `multi_line` (more than one paragraph), `value_missing` (a
//! value and none of its canonical spans), `llm_error:<code>`.
//!
//! No endpoint (`[seq.llm]` absent and no `OPENAI_BASE_URL`) → nothing is requested, the
//! template request stays and `stats.request_writer` says so.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::dataset::Build;
use crate::llm::{self, Completion, Llm, LlmConfig, LlmError, Message};
use crate::store::Store;
use crate::tools::Call;
use crate::tools::check::normalise;

/// The prompt template.
pub const TEMPLATE: &str = include_str!("../../templates/seq-request.j2");

/// English words of 1–10.
const NUMBER_WORDS: [&str; 10] = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
];

/// One line per call: `name(arg="value", …)`.
pub fn call_lines(calls: &[Call]) -> String {
    calls
        .iter()
        .map(|c| {
            let args: Vec<String> = c.arguments.iter().map(|(k, v)| format!("{k}={}", v)).collect();
            format!("{}({})", c.name, args.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The chat messages asking for the request of `calls`.
pub fn prompt(calls: &[Call]) -> Vec<Message> {
    llm::render_chat(
        "seq-request.j2",
        TEMPLATE,
        minijinja::context! { calls => call_lines(calls) },
    )
}

/// Whether `needle` (normalised) occurs in `hay` (normalised) on word boundaries.
fn contains_words(hay: &str, needle: &str) -> bool {
    let needle = normalise(needle);
    if needle.is_empty() {
        return false;
    }
    let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
    hay.match_indices(&needle)
        .any(|(i, m)| boundary(hay[..i].chars().next_back()) && boundary(hay[i + m.len()..].chars().next()))
}

/// The spans that count as `value` of argument `arg` (module docs, the table).
fn spans(arg: &str, value: &str, surface: &[(String, String)]) -> Vec<String> {
    let mut out = vec![value.to_string()];
    out.extend(surface.iter().filter(|(c, _)| c == value).map(|(_, s)| s.clone()));
    if let Ok(n) = value.parse::<usize>()
        && (1..=10).contains(&n)
    {
        out.push(NUMBER_WORDS[n - 1].to_string());
    }
    if let Some((h, m)) = value.split_once(':')
        && let (Ok(h), Ok(m)) = (h.parse::<u32>(), m.parse::<u32>())
        && h < 24
        && m < 60
    {
        let (h12, ampm) = match h {
            0 => (12, "am"),
            1..=11 => (h, "am"),
            12 => (12, "pm"),
            _ => (h - 12, "pm"),
        };
        out.push(format!("{h}:{m:02}"));
        out.push(format!("{h12}:{m:02} {ampm}"));
        out.push(format!("{h12}:{m:02}{ampm}"));
        if m == 0 {
            out.push(format!("{h12} {ampm}"));
            out.push(format!("{h12}{ampm}"));
            out.push(format!("{h12} o'clock"));
        }
    }
    let suffix = arg.rsplit(['-', '_']).next().unwrap_or(arg);
    match value {
        "True" | "False" => {
            let words: Vec<&str> = arg
                .split('_')
                .filter(|w| !matches!(*w, "is" | "has" | "are" | "to"))
                .collect();
            out.push(words.join(" "));
        }
        "yes" | "no" | "free" if suffix == "parking" => out.push("parking".into()),
        "yes" | "no" | "free" if suffix == "internet" => out.extend(["internet".into(), "wifi".into()]),
        _ => {}
    }
    out
}

/// The value check (module docs): `Ok` or the rejection reason with the first missing value.
pub fn check(request: &str, calls: &[Call], surface: &[(String, String)]) -> Result<(), (&'static str, String)> {
    let text = request.trim();
    if text.is_empty() {
        return Err(("empty", String::new()));
    }
    if text.contains("\n\n") {
        return Err(("multi_line", String::new()));
    }
    let hay = normalise(text);
    for c in calls {
        for (arg, v) in &c.arguments {
            let Some(value) = v.as_str() else { continue };
            if value == "dontcare" {
                continue;
            }
            if !spans(arg, value, surface).iter().any(|s| contains_words(&hay, s)) {
                return Err(("value_missing", format!("{}.{arg} = {value:?}", c.name)));
            }
        }
    }
    Ok(())
}

/// The model's answer as a request: the first non-empty line, without quotes or a `Request:`
/// prefix.
pub fn clean(answer: &str) -> String {
    let line = answer
        .trim()
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let line = line
        .strip_prefix("Request:")
        .or_else(|| line.strip_prefix("User:"))
        .unwrap_or(line)
        .trim();
    line.trim_matches('"').trim().to_string()
}

/// `(canonical, said)` pairs of a row's `meta.surface_forms` (SGD).
fn surface_forms(meta: Option<&Value>) -> Vec<(String, String)> {
    meta.and_then(|m| m["surface_forms"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|s| Some((s["canonical"].as_str()?.to_string(), s["said"].as_str()?.to_string())))
        .collect()
}

/// Rewrites the rows' `input` with LLM-written requests that pass [`check`] (module docs).
pub fn apply(build: &mut Build, llm_cfg: Option<&LlmConfig>, store: &Store) {
    let default = LlmConfig::default();
    let resolved = match llm::resolve(llm_cfg.unwrap_or(&default)) {
        Ok(r) => r,
        Err(u) => {
            build.stats.insert(
                "request_writer".into(),
                json!(format!("{u}; rows keep the template request")),
            );
            return;
        }
    };
    let seed = resolved.cfg.seed;
    let model = resolved.cfg.model.clone();
    let llm = Arc::new(Llm::new(resolved, store.clone()));
    let mut jobs: Vec<(String, usize, Vec<Message>)> = Vec::new();
    for (g, o) in &build.groups {
        for (i, e) in o.examples.iter().enumerate() {
            jobs.push((g.clone(), i, prompt(&e.output)));
        }
    }
    let results: Vec<Result<Completion, LlmError>> =
        llm::chat_all(llm, jobs.iter().map(|(_, _, m)| (m.clone(), seed)).collect());
    let mut by_reason: BTreeMap<String, usize> = BTreeMap::new();
    let mut samples: Vec<Value> = Vec::new();
    let mut accepted = 0usize;
    let mut answers = blake3::Hasher::new();
    for ((g, i, _), res) in jobs.iter().zip(&results) {
        let e = &mut build.groups.get_mut(g).expect("group").examples[*i];
        let verdict = match res {
            Err(err) => Err((format!("llm_error:{}", err.code), String::new())),
            Ok(c) => {
                answers.update(c.text.as_bytes());
                let request = clean(&c.text);
                check(&request, &e.output, &surface_forms(e.meta.as_ref()))
                    .map(|()| request)
                    .map_err(|(r, d)| (r.to_string(), d))
            }
        };
        match verdict {
            Ok(request) => {
                accepted += 1;
                let template = std::mem::replace(&mut e.input, request);
                if let Some(Value::Object(m)) = e.meta.as_mut() {
                    m.insert("request".into(), json!("llm"));
                    m.insert("template_request".into(), json!(template));
                }
            }
            Err((reason, detail)) => {
                if samples.len() < 10 && reason == "value_missing" {
                    samples.push(json!({"id": e.id, "missing": detail}));
                }
                *by_reason.entry(reason).or_insert(0) += 1;
            }
        }
    }
    let attempted = jobs.len();
    build.stats.insert(
        "request_writer".into(),
        json!({"model": model, "attempted": attempted, "accepted": accepted, "rejected": attempted - accepted, "rejected_by_reason": by_reason, "rejected_samples": samples, "prompt": "templates/seq-request.j2"}),
    );
    build.fold_into_key(answers.finalize().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: Value) -> Call {
        Call {
            name: name.into(),
            arguments: args.as_object().unwrap().clone(),
            label: format!("{name}_1"),
        }
    }

    #[test]
    fn every_value_or_a_documented_canonical_span_must_be_in_the_request() {
        let calls = vec![call(
            "Restaurants_2_ReserveRestaurant",
            json!({"restaurant_name": "Sino", "time": "18:00", "number_of_seats": "2", "has_live_music": "True"}),
        )];
        assert_eq!(
            check(
                "Book a table for two at Sino at 6 pm, somewhere with live music.",
                &calls,
                &[]
            ),
            Ok(())
        );
        let err = check("Book a table for two at Sinopia at 6 pm with live music.", &calls, &[]).unwrap_err();
        assert_eq!(err.0, "value_missing");
        assert!(err.1.contains("Sino"), "{err:?}");
        // A surface form the user said counts for its canonical value.
        let calls = vec![call("R", json!({"time": "11:30"}))];
        let said = vec![("11:30".to_string(), "half past 11 in the morning".to_string())];
        assert_eq!(check("At half past 11 in the morning please.", &calls, &said), Ok(()));
        assert_eq!(check("", &calls, &said).unwrap_err().0, "empty");
        // MultiWOZ yes/no flags.
        let calls = vec![call(
            "find_hotel",
            json!({"hotel-parking": "yes", "hotel-area": "centre"}),
        )];
        assert_eq!(check("A hotel in the centre with free parking.", &calls, &[]), Ok(()));
    }

    #[test]
    fn answers_are_cleaned_to_one_line() {
        assert_eq!(
            clean("  Request: \"Find me a cheap hotel.\"\nextra"),
            "Find me a cheap hotel."
        );
        let p = prompt(&[call("find_hotel", json!({"hotel-area": "centre"}))]);
        assert!(
            p.last().unwrap().content.contains(r#"find_hotel(hotel-area="centre")"#),
            "{p:?}"
        );
    }
}
