//! The trajectories of a build, one store entry per group (database), like the compile stages
//! (issue 17): an `out/`-only rebuild reads them back and writes the files, it does not execute
//! every call again.
//!
//! An entry is keyed ([`StageKey`], stage `emit-trajectories`) by everything a trajectory is a
//! function of: the group's verified examples (their JSON), the dataset catalog (references
//! resolve through it), the `[trajectories]` knobs, the family, the database file's hash, the
//! REST endpoints (`tools/endpoints.json`) and the code fingerprint. Its payload holds the
//! [`Line`]s, one per verified example in group order ([`encode`]: the lines' texts stored as
//! they are, not escaped into JSON strings); an entry that does not decode or whose length
//! differs is recomputed.

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::dataset::{Build, Example, code_fingerprint, examples_digest};
use crate::store::{StageKey, Store};

/// Version of the stored trajectories; bump when a trajectory's text changes for the same inputs.
pub const EMIT_TRAJECTORIES_VERSION: u32 = 5;

/// One verified example's trajectory lines.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// The clean trajectory's JSON line (no newline), `None` when skipped.
    pub clean: Option<String>,
    /// The faulted copy's JSON line, when the example has one and it is written.
    pub faulted: Option<String>,
    /// Skip reasons ([`super::OVER_SIZE_CAP`], [`super::NO_MODEL_CALLS`]), one per skip.
    pub skipped: Vec<String>,
}

impl From<super::Built> for Line {
    fn from(b: super::Built) -> Line {
        Line {
            clean: b.clean,
            faulted: b.faulted,
            skipped: b.skipped.into_iter().map(str::to_string).collect(),
        }
    }
}

/// Whether an example gets trajectories: verified rows, not variant rows (drifted, obfuscated, …
/// calls are not directly executable).
pub fn is_original(e: &Example) -> bool {
    e.meta.as_ref().is_none_or(|m| m.get("variant_of").is_none())
}

fn hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// The stored trajectories of one build: what every group's [`StageKey`] shares, computed once.
pub struct GroupLines<'b> {
    build: &'b Build,
    store: Option<&'b Store>,
    catalog: String,
    endpoints: String,
    config: serde_json::Value,
}

impl<'b> GroupLines<'b> {
    /// The stored trajectories of `build` in `store` (`None`: nothing read or stored).
    pub fn new(build: &'b Build, store: Option<&'b Store>) -> GroupLines<'b> {
        GroupLines {
            build,
            store,
            catalog: hex(&serde_json::to_vec(&build.catalog).expect("serialise")),
            endpoints: build
                .extra_files
                .get("tools/endpoints.json")
                .map_or_else(|| "none".to_string(), |b| hex(b)),
            config: json!({"format": build.recipe.format, "trajectories": build.recipe.trajectories, "code": code_fingerprint()}),
        }
    }

    /// The [`Line`]s of group `group`'s verified examples `originals` (in group order, one line
    /// each): read from the store when it holds them, otherwise computed by `compute` and stored.
    /// Errors: `compute`'s.
    pub fn of(
        &self,
        group: &str,
        originals: &[&Example],
        compute: impl FnOnce(&[&Example]) -> Result<Vec<Line>>,
    ) -> Result<Vec<Line>> {
        if originals.is_empty() {
            return Ok(Vec::new());
        }
        let key = StageKey {
            stage: "emit-trajectories".into(),
            version: EMIT_TRAJECTORIES_VERSION,
            config: self.config.clone(),
            inputs: vec![
                examples_digest(originals),
                self.catalog.clone(),
                self.build
                    .source_hashes
                    .get(&format!("database/{group}"))
                    .cloned()
                    .unwrap_or_else(|| "none".into()),
                self.endpoints.clone(),
            ],
        };
        // An entry that does not decode (or lists another number of rows) is removed and
        // recomputed (`Store::load`).
        let stored = self.store.and_then(|s| {
            s.load(&key, |b| {
                decode(b)
                    .filter(|l| l.len() == originals.len())
                    .ok_or_else(|| format!("not {} trajectories", originals.len()))
            })
        });
        if let Some(lines) = stored {
            return Ok(lines);
        }
        let lines = compute(originals)?;
        if let Some(s) = self.store {
            let _ = s.put(&key, &encode(&lines));
        }
        Ok(lines)
    }
}

/// The store payload of `lines`: a JSON header, one `[clean length, faulted length, skip
/// reasons]` per line (a length `null` when that text is absent; lengths in bytes), a newline,
/// then every line's clean and faulted texts concatenated in that order. The texts are JSON
/// lines already; stored this way they are copied, never escaped into and out of JSON strings
/// (a sel-spider build's trajectories are 35 MB, issue 17).
fn encode(lines: &[Line]) -> Vec<u8> {
    let header: Vec<(Option<usize>, Option<usize>, &[String])> = lines
        .iter()
        .map(|l| {
            (
                l.clean.as_ref().map(String::len),
                l.faulted.as_ref().map(String::len),
                l.skipped.as_slice(),
            )
        })
        .collect();
    let mut out = serde_json::to_vec(&header).expect("serialise");
    out.push(b'\n');
    for text in lines.iter().flat_map(|l| l.clean.iter().chain(&l.faulted)) {
        out.extend_from_slice(text.as_bytes());
    }
    out
}

/// The lines of an [`encode`]d payload; `None` when it is not one (a header that does not parse,
/// lengths that do not add up to the texts, a text that is not UTF-8).
fn decode(bytes: &[u8]) -> Option<Vec<Line>> {
    let newline = bytes.iter().position(|&b| b == b'\n')?;
    let header: Vec<(Option<usize>, Option<usize>, Vec<String>)> = serde_json::from_slice(&bytes[..newline]).ok()?;
    let mut rest = &bytes[newline + 1..];
    let mut take = |len: Option<usize>| -> Option<Option<String>> {
        let Some(len) = len else {
            return Some(None);
        };
        let (text, tail) = rest.split_at_checked(len)?;
        rest = tail;
        Some(Some(String::from_utf8(text.to_vec()).ok()?))
    };
    let lines = header
        .into_iter()
        .map(|(clean, faulted, skipped)| {
            Some(Line {
                clean: take(clean)?,
                faulted: take(faulted)?,
                skipped,
            })
        })
        .collect::<Option<Vec<Line>>>()?;
    rest.is_empty().then_some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_lines_decode_to_the_same_lines_and_a_damaged_entry_does_not_decode() {
        let lines = vec![
            Line {
                clean: Some(r#"{"id":"a/1","messages":[{"content":"é\n\"x\""}]}"#.into()),
                faulted: Some(r#"{"id":"a/1","faults":[]}"#.into()),
                skipped: Vec::new(),
            },
            Line {
                clean: None,
                faulted: None,
                skipped: vec!["over_size_cap".into(), "over_size_cap".into()],
            },
            Line {
                clean: Some("{}".into()),
                faulted: None,
                skipped: vec!["over_size_cap".into()],
            },
        ];
        let bytes = encode(&lines);
        assert_eq!(decode(&bytes), Some(lines.clone()));
        assert_eq!(decode(&bytes[..bytes.len() - 1]), None, "a text cut short");
        let mut longer = bytes.clone();
        longer.push(b'x');
        assert_eq!(decode(&longer), None, "bytes beyond the texts");
        assert_eq!(decode(b"not a header\n{}"), None);
        assert_eq!(decode(&encode(&[])), Some(Vec::new()));
    }
}
