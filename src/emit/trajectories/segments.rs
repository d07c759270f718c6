//! A group's emitted trajectory segment (issue 34 item 1): the exact bytes every trajectory file
//! gets from one group (database or split) — `trajectories/<split>[.faults].jsonl`, their OpenAI
//! form under `trajectories/openai/` and the OpenAI form's sidecar — and the group's skip counts.
//! Shards compute the segments of their groups and store them; the merge reads them and
//! concatenates bytes in group order ([`super::write`]): it executes no call, builds no
//! trajectory and serialises no JSON.
//!
//! Keyed ([`StageKey`], stage [`STAGE`]) by the build key and the group name: the build key
//! changes whenever any output file could ([`crate::dataset::Build::build_key`], LLM answers
//! folded in), so equal keys mean equal bytes; the code fingerprint is in the config too.
//!
//! The sidecar's `line` is the line's position in the whole file, which a group cannot know:
//! a segment holds each sidecar line without its `{"line":N` head (the [`Part::sidecar`]
//! tails), and the writer puts the head back as it numbers the lines
//! ([`super::write::Files::append`]).

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use serde_json::{Value as Json, json};

use super::{cached, variants};
use crate::dataset::{Build, Example, Outcome, code_fingerprint};
use crate::store::StageKey;
use crate::tools::ToolSpec;

/// Stage name of a group's trajectory segment in the store.
pub const STAGE: &str = "emit-trajectory-segments";

/// Version of the stored segments; bump when a segment's bytes change for the same build key.
pub const EMIT_SEGMENTS_VERSION: u32 = 1;

/// The head of a sidecar line written by [`super::export::to_openai`] for line 0.
const SIDECAR_HEAD: &str = "{\"line\":0";

/// What one group gives one split's clean or faulted files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Part {
    /// `trajectories/<split><kind>.jsonl` lines, each ending in a newline.
    pub default: Vec<u8>,
    /// `trajectories/openai/<split><kind>.jsonl` lines, each ending in a newline.
    pub openai: Vec<u8>,
    /// The sidecar lines without their `{"line":N` head (each `,"id":…}` and a newline).
    pub sidecar: Vec<u8>,
    /// Number of lines (the same in the three files).
    pub lines: usize,
}

impl Part {
    /// Appends trajectory `line` (JSON text, the default form) in its three forms.
    fn push(&mut self, line: &str) -> Result<()> {
        let t: Json = serde_json::from_str(line)?;
        let (openai, sidecar) = super::export::to_openai(&t, 0);
        self.default.extend_from_slice(line.as_bytes());
        self.default.push(b'\n');
        self.openai.extend_from_slice(openai.to_string().as_bytes());
        self.openai.push(b'\n');
        let sidecar = sidecar.to_string();
        let tail = sidecar
            .strip_prefix(SIDECAR_HEAD)
            .ok_or_else(|| anyhow::anyhow!("sidecar line without its line number first: {sidecar}"))?;
        self.sidecar.extend_from_slice(tail.as_bytes());
        self.sidecar.push(b'\n');
        self.lines += 1;
        Ok(())
    }
}

/// One group's segment: its [`Part`] of each (split, kind) file — kind 0 clean, 1 faulted — and
/// the trajectories it does not write, counted by reason.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Segment {
    /// (split, kind) → the group's part of those files.
    pub parts: BTreeMap<(String, u8), Part>,
    /// Skip reason → count, for this group.
    pub skipped: BTreeMap<String, usize>,
}

/// The store key of `group`'s segment in `build`.
pub fn key(build: &Build, group: &str) -> StageKey {
    StageKey {
        stage: STAGE.into(),
        version: EMIT_SEGMENTS_VERSION,
        config: json!({"code": code_fingerprint()}),
        inputs: vec![build.build_key.clone(), group.to_string()],
    }
}

/// The segment of one group (`outcome`, its trajectory `lines`: one per verified example, in
/// order); `catalog` is the build's tools by name. Variant rows get a clean trajectory rewritten
/// from their parent's ([`variants`]); a variant's parent is in its group. Errors: a line that
/// is not JSON (never for lines this build wrote).
pub fn build_segment(
    build: &Build,
    outcome: &Outcome,
    lines: &[cached::Line],
    catalog: &HashMap<&str, &ToolSpec>,
) -> Result<Segment> {
    let originals = outcome.examples.iter().filter(|e| cached::is_original(e));
    let parents: HashMap<(&str, &str), (&Example, &cached::Line)> = originals
        .zip(lines)
        .map(|(e, l)| ((e.split.as_str(), e.id.as_str()), (e, l)))
        .collect();
    let max_chars = build.recipe.trajectories.max_chars;
    let mut segment = Segment::default();
    // The verified examples' lines, met in the same order as the examples.
    let mut next_line = lines.iter();
    for e in &outcome.examples {
        let variant_line;
        let line = if cached::is_original(e) {
            next_line.next().expect("one line per verified example")
        } else {
            let parent = e.meta.as_ref().and_then(|m| m["variant_of"].as_str());
            let Some((p, Some(t))) = parent
                .and_then(|id| parents.get(&(e.split.as_str(), id)))
                .map(|(p, l)| (p, l.clean.as_ref()))
            else {
                continue;
            };
            let t: Json = serde_json::from_str(t)?;
            let v = variants::variant_trajectory(e, p, &t, catalog, max_chars);
            variant_line = cached::Line {
                skipped: v.as_ref().err().map(|r| r.to_string()).into_iter().collect(),
                clean: v.ok().map(|t| t.to_string()),
                faulted: None,
            };
            &variant_line
        };
        for (kind, text) in [(0u8, &line.clean), (1u8, &line.faulted)] {
            if let Some(t) = text {
                segment.parts.entry((e.split.clone(), kind)).or_default().push(t)?;
            }
        }
        for r in &line.skipped {
            *segment.skipped.entry(r.clone()).or_default() += 1;
        }
    }
    Ok(segment)
}

impl Segment {
    /// The store payload: a JSON header `{"parts": [[split, kind, lines, default bytes, openai
    /// bytes, sidecar bytes], …], "skipped": {reason: n}}`, a newline, then every part's three
    /// byte strings in header order (copied, never escaped into JSON strings).
    pub fn encode(&self) -> Vec<u8> {
        let parts: Vec<Json> = self
            .parts
            .iter()
            .map(|((split, kind), p)| json!([split, kind, p.lines, p.default.len(), p.openai.len(), p.sidecar.len()]))
            .collect();
        let mut out = serde_json::to_vec(&json!({"parts": parts, "skipped": self.skipped})).expect("serialise");
        out.push(b'\n');
        for p in self.parts.values() {
            out.extend_from_slice(&p.default);
            out.extend_from_slice(&p.openai);
            out.extend_from_slice(&p.sidecar);
        }
        out
    }

    /// The segment of an [`Segment::encode`]d payload; `Err(why)` when it is not one (a header
    /// that does not parse, lengths that do not add up to the bytes).
    pub fn decode(bytes: &[u8]) -> Result<Segment, String> {
        type Header = (String, u8, usize, usize, usize, usize);
        #[derive(serde::Deserialize)]
        struct Head {
            parts: Vec<Header>,
            skipped: BTreeMap<String, usize>,
        }
        let newline = bytes.iter().position(|&b| b == b'\n').ok_or("no header")?;
        let head: Head = serde_json::from_slice(&bytes[..newline]).map_err(|e| format!("header: {e}"))?;
        let mut rest = &bytes[newline + 1..];
        let mut take = |len: usize| -> Result<Vec<u8>, String> {
            let (text, tail) = rest.split_at_checked(len).ok_or("bytes cut short")?;
            rest = tail;
            Ok(text.to_vec())
        };
        let mut parts = BTreeMap::new();
        for (split, kind, lines, d, o, s) in head.parts {
            let part = Part {
                default: take(d)?,
                openai: take(o)?,
                sidecar: take(s)?,
                lines,
            };
            let count = |b: &[u8]| b.iter().filter(|&&c| c == b'\n').count();
            if [count(&part.default), count(&part.openai), count(&part.sidecar)] != [lines; 3] {
                return Err(format!("{split}: not {lines} lines in each file"));
            }
            parts.insert((split, kind), part);
        }
        if !rest.is_empty() {
            return Err("bytes beyond the parts".into());
        }
        Ok(Segment {
            parts,
            skipped: head.skipped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_segment_decodes_to_the_same_bytes_and_a_damaged_one_does_not() {
        let mut s = Segment::default();
        let line = r#"{"id":"a/1","messages":[{"role":"user","content":"é\n\"x\""}],"tools":[],"gold_answer":"[]","faults":[]}"#;
        s.parts.entry(("dev".into(), 0)).or_default().push(line).unwrap();
        s.parts.entry(("dev".into(), 0)).or_default().push(line).unwrap();
        s.parts.entry(("train".into(), 1)).or_default().push(line).unwrap();
        s.skipped.insert("over_size_cap".into(), 2);
        let part = &s.parts[&("dev".to_string(), 0)];
        assert_eq!(part.lines, 2);
        assert!(
            part.sidecar
                .starts_with(br#","id":"a/1","gold_answer":"[]","faults":[]}"#)
        );
        let bytes = s.encode();
        assert_eq!(Segment::decode(&bytes), Ok(s.clone()));
        assert!(Segment::decode(&bytes[..bytes.len() - 1]).is_err(), "cut short");
        let mut longer = bytes.clone();
        longer.push(b'x');
        assert!(Segment::decode(&longer).is_err(), "bytes beyond the parts");
        assert!(Segment::decode(b"not a header\n").is_err());
        assert_eq!(Segment::decode(&Segment::default().encode()), Ok(Segment::default()));
    }
}
