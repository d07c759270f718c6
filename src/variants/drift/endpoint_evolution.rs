//! `endpoint_evolution`: the function gets a new version, `f` → `f_v2`; a REST endpoint's path
//! `/v1/…` → `/v2/…` too (and its description, which names the path). The new name stays within
//! OpenAI's 64 characters ([`versioned`]) and unique in its catalog ([`super::plan`] numbers a
//! collision).
//!
//! Migration of a gold call: its name becomes `f_v2`; always loud (the old name no longer
//! exists). Un-migration: the name goes back to `f`.

use super::Change;
use crate::tools::ToolSpec;
use crate::tools::rest::MAX_NAME;

/// The versioned name of `name` in at most [`MAX_NAME`] characters (OpenAI's function-name
/// limit): `f_v2`, or with `n` > 0 `f_<n>_v2` (a collision's number). A name too long for the
/// suffix loses whole words (never part of one) from just before its last word — the word that
/// tells two endpoints apart when names share a stem (`…_via_destairport`); only a first and
/// last word that are together still too long are cut, at the limit.
pub fn versioned(name: &str, n: usize) -> String {
    let suffix = if n == 0 { "_v2".to_string() } else { format!("_{n}_v2") };
    if name.len() + suffix.len() <= MAX_NAME {
        return format!("{name}{suffix}");
    }
    let mut words: Vec<&str> = name.split('_').filter(|w| !w.is_empty()).collect();
    while words.len() > 2 && words.join("_").len() + suffix.len() > MAX_NAME {
        words.remove(words.len() - 2);
    }
    let mut base = words.join("_");
    // Names are ASCII (`^[a-zA-Z0-9_-]+$`), so a byte index is a character index.
    base.truncate(MAX_NAME - suffix.len());
    format!("{base}{suffix}")
}

/// The change for `spec` (always applicable); `path`: a REST endpoint's A_old path.
pub(super) fn propose(spec: &ToolSpec, path: Option<&str>) -> Vec<Change> {
    vec![Change::EndpointEvolution {
        name_old: spec.name.clone(),
        name_new: versioned(&spec.name, 0),
        path_old: path.map(String::from),
        path_new: path.map(|p| p.replacen("/v1/", "/v2/", 1)),
    }]
}

/// A_new: the new name; the path replaced in the description.
pub(super) fn apply(new: &mut ToolSpec, name_new: &str, path_old: &Option<String>, path_new: &Option<String>) {
    new.name = name_new.to_string();
    if let (Some(a), Some(b)) = (path_old, path_new) {
        new.description = new.description.replace(a.as_str(), b);
    }
}
