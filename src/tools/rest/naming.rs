//! Endpoint names: `get_<table>_<returns>[_by_<parameters>][_per_<group>][_sorted_by_<keys>]`,
//! at most [`MAX_NAME`] characters, cut only between whole words, and made unique per database
//! and across a catalog by saying how two endpoints differ.

use std::collections::{BTreeMap, BTreeSet};

use super::Endpoint;
use crate::tools::template::{Template, slug};

/// Longest function name: OpenAI function names allow 64 characters.
pub const MAX_NAME: usize = 64;

/// Joins `words` with `_`, dropping whole words from the end (never cutting one) until the
/// name fits in `max` characters; the first word is always kept.
pub fn fit_words(words: &[String], max: usize) -> String {
    let mut out = String::new();
    for (i, w) in words.iter().enumerate() {
        let extra = if i == 0 { w.len() } else { w.len() + 1 };
        if i > 0 && out.len() + extra > max {
            break;
        }
        if i > 0 {
            out.push('_');
        }
        out.push_str(w);
    }
    // No dangling connective at the end (`…_by`, `…_sorted_by`, `…_and`).
    while let Some((head, last)) = out.rsplit_once('_') {
        if !CONNECTIVES.contains(&last) {
            break;
        }
        out = head.to_string();
    }
    out
}

/// Words that join the segments of a name; never the last word of a name.
const CONNECTIVES: [&str; 8] = ["by", "and", "per", "sorted", "of", "in", "with", "or"];

/// The words of a snake_case name.
fn words(s: &str) -> Vec<String> {
    s.split('_').filter(|w| !w.is_empty()).map(String::from).collect()
}

/// Makes endpoint names unique across a whole dataset catalog (all databases), so
/// `functions.json`, OpenAPI operation ids and MCP tool names are one string per endpoint:
/// a name used by endpoints of several databases becomes `<name>_in_<db_id>` for each of them
/// (whole words of `<name>` dropped from its end if the result would pass [`MAX_NAME`]).
/// Returns the renames as `(db_id, old name) → new name`.
pub fn qualify_across_databases(endpoints: &mut [Endpoint]) -> BTreeMap<(String, String), String> {
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for e in endpoints.iter() {
        *count.entry(e.name.clone()).or_default() += 1;
    }
    let mut taken: BTreeSet<String> = endpoints.iter().map(|e| e.name.clone()).collect();
    let mut renames = BTreeMap::new();
    for e in endpoints.iter_mut() {
        if count[&e.name] < 2 {
            continue;
        }
        let suffix = format!("_in_{}", e.db_id);
        let mut name = format!(
            "{}{suffix}",
            fit_words(&words(&e.name), MAX_NAME.saturating_sub(suffix.len()))
        );
        let mut n = 2;
        while taken.contains(&name) {
            name = format!(
                "{}{suffix}_{n}",
                fit_words(&words(&e.name), MAX_NAME.saturating_sub(suffix.len() + 3))
            );
            n += 1;
        }
        taken.insert(name.clone());
        renames.insert((e.db_id.clone(), e.name.clone()), name.clone());
        e.name = name;
    }
    renames
}

/// The name segments of a template: `get_<table>_<returns>`, `by_<parameters>`,
/// `per_<group keys>`, `sorted_by_<keys>` (each segment whole words).
fn name_segments(t: &Template) -> Vec<String> {
    let returns = if t.returns.is_empty() {
        "rows".to_string()
    } else {
        let mut r: Vec<&str> = t.returns.iter().map(String::as_str).take(3).collect();
        r.dedup();
        r.join("_and_")
    };
    let mut segments = vec![format!("get_{}_{returns}", t.table)];
    let mut by: Vec<String> = Vec::new();
    for p in t.parameters.iter().filter(|p| !p.optional) {
        let base = p
            .name
            .trim_end_matches(|c: char| c.is_ascii_digit() || c == '_')
            .to_string();
        if !by.contains(&base) {
            by.push(base);
        }
    }
    if !by.is_empty() {
        segments.push(format!("by_{}", by.join("_and_")));
    }
    if !t.group_by.is_empty() {
        segments.push(format!("per_{}", t.group_by.join("_and_")));
    }
    if !t.order_by.is_empty() {
        segments.push(format!("sorted_by_{}", t.order_by.join("_and_")));
    }
    segments
}

/// Joins name segments, dropping whole segments from the end (then whole words of the first)
/// until the name fits in `max` characters: a name is never cut inside a word.
pub fn fit_segments(segments: &[String], max: usize) -> String {
    let mut out = fit_words(&words(&segments[0]), max);
    for s in &segments[1..] {
        if out.len() + 1 + s.len() > max {
            break;
        }
        out.push('_');
        out.push_str(s);
    }
    out
}

/// Content words of a summary, slugged, in order (for naming a difference).
fn summary_words(s: &str) -> Vec<String> {
    // Parameter placeholders (`{city_2}`) are not words of the meaning.
    let mut text = String::new();
    let mut depth = 0;
    for ch in s.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            c if depth == 0 => text.push(c),
            _ => {}
        }
    }
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.len() > 2 && !w.starts_with(|c: char| c.is_ascii_digit()))
        .map(|w| w.to_lowercase())
        .filter(|w| !CONNECTIVES.contains(&w.as_str()) && !["the", "returns", "rows", "where"].contains(&w.as_str()))
        .collect()
}

/// The words of a parameterised query, for naming how two endpoints differ when their
/// summaries do not: identifiers and keywords lower-cased, comparison operators as words
/// (`>` `above`, `>=` `at_least`, `<` `below`, `<=` `at_most`, `!=` `not_equal`, `=` `equal`),
/// numbers and placeholders left out (a name never ends in a number).
fn sql_words(sql: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |w: String| {
        if !w.is_empty() && !w.starts_with(|c: char| c.is_ascii_digit()) && !out.contains(&w) {
            out.push(w);
        }
    };
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' {
            while chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                chars.next();
            }
        } else if c.is_alphanumeric() || c == '_' {
            let mut w = c.to_string();
            while let Some(&d) = chars.peek().filter(|d| d.is_alphanumeric() || **d == '_') {
                w.push(d);
                chars.next();
            }
            push(slug(&w));
        } else if "<>=!".contains(c) {
            let mut op = c.to_string();
            while let Some(&d) = chars.peek().filter(|d| "<>=".contains(**d)) {
                op.push(d);
                chars.next();
            }
            let word = match op.as_str() {
                ">" => "above",
                ">=" => "at_least",
                "<" => "below",
                "<=" => "at_most",
                "!=" | "<>" => "not_equal",
                _ => "equal",
            };
            push(word.to_string());
        }
    }
    out
}

/// Each word as a name word.
fn slugged(words: Vec<String>) -> Vec<String> {
    words.iter().map(|w| slug(w)).filter(|w| !w.is_empty()).collect()
}

/// The words of `mine` that `theirs` lacks, in order.
fn lacking(mine: &[String], theirs: &[String]) -> Vec<String> {
    mine.iter().filter(|w| !theirs.contains(w)).cloned().collect()
}

/// Builds the endpoints of one database from its distinct templates (in first-question order).
/// Names: `get_<table>_<returns>[_by_<parameters>][_per_<group>][_sorted_by_<keys>]`, at most
/// [`MAX_NAME`] characters, whole segments or words dropped rather than cut. Where that name is
/// taken, the name says the difference: `_via_<w>` with the first word of this endpoint's summary
/// that the holder's lacks (e.g. `…_via_destairport` vs the `sourceairport` one), or
/// `_without_<w>` with the first word the holder has and this one lacks; when the summaries do
/// not differ, the same with the words of the two queries ([`sql_words`]: `…_via_distinct`,
/// `…_via_at_least`); a name still taken gets the next word against its own holder
/// (`…_via_population_greater`); a number only when no word tells them apart. The summary is
/// [`Template::summary`]; the path mirrors the name under `/v1/<source>/<db_id>/<table>/`.
pub fn name_endpoints(source: &str, db_id: &str, templates: &[&Template]) -> Vec<Endpoint> {
    // Name → (summary, SQL) of the endpoint that has it.
    let mut used: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut out = Vec::new();
    for t in templates {
        let segments = name_segments(t);
        let mut name = fit_segments(&segments, MAX_NAME);
        // Taken: say how this endpoint differs from the one holding the name, a word at a time,
        // until the name is free: `…_via_population` (a word only this one has), then
        // `…_via_population_greater` against the holder of that.
        let mut suffix = String::new();
        for _ in 0..6 {
            let Some((other, other_sql)) = used.get(&name) else {
                break;
            };
            let shown: Vec<&str> = suffix.split('_').collect();
            let fresh =
                |a: Vec<String>, b: Vec<String>| lacking(&a, &b).into_iter().find(|w| !shown.contains(&w.as_str()));
            let (my_words, their_words) = (slugged(summary_words(&t.summary)), slugged(summary_words(other)));
            let has =
                fresh(my_words.clone(), their_words.clone()).or_else(|| fresh(sql_words(&t.sql), sql_words(other_sql)));
            let step = match has {
                Some(w) if suffix.is_empty() => format!("_via_{w}"),
                Some(w) => format!("_{w}"),
                None => match fresh(their_words, my_words).or_else(|| fresh(sql_words(other_sql), sql_words(&t.sql))) {
                    Some(w) => format!("_without_{w}"),
                    None => break,
                },
            };
            suffix.push_str(&step);
            name = format!(
                "{}{suffix}",
                fit_segments(&segments, MAX_NAME.saturating_sub(suffix.len().min(40)))
            );
        }
        let mut n = 2;
        while used.contains_key(&name) || name.len() > MAX_NAME {
            name = format!("{}_{n}", fit_segments(&segments, MAX_NAME - 3));
            n += 1;
        }
        used.insert(name.clone(), (t.summary.clone(), t.sql.clone()));
        let tail = name
            .strip_prefix(&format!("get_{}_", t.table))
            .unwrap_or(&name)
            .to_string();
        out.push(Endpoint {
            db_id: db_id.into(),
            name,
            path: format!("/v1/{}/{}/{}/{}", slug(source), db_id, t.table, tail),
            summary: t.summary.clone(),
            sql: t.sql.clone(),
            parameters: t.parameters.clone(),
            ordered: t.ordered,
        });
    }
    out
}
