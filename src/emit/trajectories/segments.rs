//! A group's emitted segment (issue 34 item 1): the exact bytes every trajectory file gets from
//! one group (database or split) — `trajectories/<split>[.faults].jsonl`, their OpenAI form under
//! `trajectories/openai/` and the OpenAI form's sidecar —, the group's skip counts, and its rows
//! of each split (`data/<split>.jsonl` lines and a Parquet part, [`crate::emit::rows::RowsPart`]).
//! Shards compute the segments of their groups and store them; the merge reads them and
//! concatenates bytes in group order ([`super::write`]): it executes no call, builds no
//! trajectory, serialises no JSON and encodes no Parquet.
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
use bytes::Bytes;
use serde_json::{Value as Json, json};

use super::{cached, variants};
use crate::dataset::{Build, Example, ItemRef, code_fingerprint};
use crate::emit::rows::RowsPart;
use crate::store::StageKey;
use crate::tools::ToolSpec;

/// Stage name of a group's trajectory segment in the store.
pub const STAGE: &str = "emit-trajectory-segments";

/// Version of the stored segments; bump when a segment's bytes change for the same build key.
pub const EMIT_SEGMENTS_VERSION: u32 = 3;

/// What one group gives one split's clean or faulted files (views into a stored segment's
/// payload when read from the store: the merge copies each byte once, into the file).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Part {
    /// `trajectories/<split><kind>.jsonl` lines, each ending in a newline.
    pub default: Bytes,
    /// `trajectories/openai/<split><kind>.jsonl` lines, each ending in a newline.
    pub openai: Bytes,
    /// The sidecar lines without their `{"line":N` head (each `,"id":…}` and a newline).
    pub sidecar: Bytes,
    /// Number of lines (the same in the three files).
    pub lines: usize,
}

/// A [`Part`] being built, line by line ([`PartBuf::push`]).
#[derive(Debug, Default)]
pub struct PartBuf {
    default: Vec<u8>,
    openai: Vec<u8>,
    sidecar: Vec<u8>,
    lines: usize,
}

impl PartBuf {
    /// Appends trajectory `line` (JSON text, the default form) in its three forms.
    pub fn push(&mut self, line: &str) -> Result<()> {
        self.push_capped(line, None).map(|_| ())
    }

    /// [`PartBuf::push`] unless the trajectory's estimated tokens
    /// ([`crate::emit::card::tokens`] of its OpenAI line's characters) exceed `max_tokens`; returns
    /// whether it was pushed (a trajectory over the cap is dropped whole, never truncated). The
    /// OpenAI line and sidecar are made from `line`'s text ([`super::openai_text`]), never
    /// from a parsed tree. Errors: `line` is not JSON.
    pub fn push_capped(&mut self, line: &str, max_tokens: Option<usize>) -> Result<bool> {
        let (openai, tail) = super::openai_text::openai_text(line)?;
        if max_tokens.is_some_and(|cap| crate::emit::card::tokens(openai.chars().count()) as usize > cap) {
            return Ok(false);
        }
        self.default.extend_from_slice(line.as_bytes());
        self.default.push(b'\n');
        self.openai.extend_from_slice(openai.as_bytes());
        self.openai.push(b'\n');
        self.sidecar.extend_from_slice(tail.as_bytes());
        self.sidecar.push(b'\n');
        self.lines += 1;
        Ok(true)
    }

    /// The part built.
    pub fn freeze(self) -> Part {
        Part {
            default: self.default.into(),
            openai: self.openai.into(),
            sidecar: self.sidecar.into(),
            lines: self.lines,
        }
    }
}

/// One group's rows of one split: their `data/<split>.jsonl` lines and their Parquet part.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rows {
    /// The JSONL lines, each ending in a newline.
    pub jsonl: Bytes,
    /// How many lines `jsonl` holds (the part's rows, except in a chunk: [`chunk_rows`]).
    pub lines: usize,
    /// The encoded rows ([`RowsPart`]).
    pub part: RowsPart,
}

/// One group's segment: its [`Part`] of each (split, kind) file — kind 0 clean, 1 faulted —,
/// the trajectories it does not write, counted by reason, and its [`Rows`] of each split.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Segment {
    /// (split, kind) → the group's part of those files.
    pub parts: BTreeMap<(String, u8), Part>,
    /// Skip reason → count, for this group.
    pub skipped: BTreeMap<String, usize>,
    /// Split → the group's rows of that split (every example of the group, variants too).
    pub rows: BTreeMap<String, Rows>,
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

/// The store key of chunk `chunk` of `name`'s segment in `build`, when a large unit is cut into
/// chunks ([`super::write`]'s `push_later`).
pub fn chunk_key(build: &Build, name: &str, chunk: usize) -> StageKey {
    let mut key = key(build, name);
    key.inputs.push(format!("chunk {chunk}"));
    key
}

/// Stage name of a compile item's segment in the store ([`item_key`]).
pub const ITEM_STAGE: &str = "emit-item-segments";

/// The store key of the segment of compile item `item` of `build`, when segments are per item
/// ([`crate::emit::segments_per_item`]): a function of the item's compile stage (its key's
/// digest: the questions, the database file's bytes, the recipe knobs the stage reads, the code),
/// the whole recipe (its `[trajectories]` knobs, tool pool, …) and the code — nothing outside
/// the item, so the shard compiling the item computes its segment in the same run.
pub fn item_key(build: &Build, item: &ItemRef) -> StageKey {
    let recipe = blake3::hash(&serde_json::to_vec(&build.recipe).expect("serialise"));
    StageKey {
        stage: ITEM_STAGE.into(),
        version: EMIT_SEGMENTS_VERSION,
        config: json!({"code": code_fingerprint(), "recipe": recipe.to_hex().to_string()}),
        inputs: vec![item.digest.clone()],
    }
}

/// The segment of a group's `examples` (all of them, or one compile item's run of them), with
/// their trajectory `lines` (one per verified example, in order); `catalog` is the build's tools
/// by name; `parquet`: `None` when the examples are a whole unit, else the Parquet rows this
/// chunk carries ([`chunk_rows`]). Variant rows get a clean trajectory rewritten from their parent's ([`variants`]); a
/// variant's parent is among the examples (its group's). Errors: a line that is not JSON (never
/// for lines this build wrote), a rows part that does not encode.
pub fn build_segment(
    build: &Build,
    examples: &[Example],
    lines: &[cached::Line],
    catalog: &HashMap<&str, &ToolSpec>,
    parquet: Option<&[Example]>,
) -> Result<Segment> {
    let originals = examples.iter().filter(|e| cached::is_original(e));
    let parents: HashMap<(&str, &str), (&Example, &cached::Line)> = originals
        .zip(lines)
        .map(|(e, l)| ((e.split.as_str(), e.id.as_str()), (e, l)))
        .collect();
    let max_chars = build.recipe.trajectories.max_chars;
    let max_tokens = build.recipe.trajectories.max_tokens;
    let mut segment = Segment::default();
    let mut parts: BTreeMap<(String, u8), PartBuf> = BTreeMap::new();
    // Each parent's clean trajectory parsed once, for all its variants (in order after it).
    let mut parsed: HashMap<(&str, &str), Json> = HashMap::new();
    // The verified examples' lines, met in the same order as the examples.
    let mut next_line = lines.iter();
    for e in examples {
        if cached::is_original(e) {
            let line = next_line.next().expect("one line per verified example");
            for (kind, text) in [(0u8, &line.clean), (1u8, &line.faulted)] {
                if let Some(t) = text {
                    let part = parts.entry((e.split.clone(), kind)).or_default();
                    if !part.push_capped(t, max_tokens)? {
                        *segment.skipped.entry(super::OVER_TOKEN_CAP.to_string()).or_default() += 1;
                    }
                }
            }
            for r in &line.skipped {
                *segment.skipped.entry(r.clone()).or_default() += 1;
            }
            continue;
        }
        let parent = e.meta.as_ref().and_then(|m| m["variant_of"].as_str());
        let Some((key, p, Some(t))) = parent.and_then(|id| {
            parents
                .get_key_value(&(e.split.as_str(), id))
                .map(|(k, (p, l))| (*k, p, l.clean.as_ref()))
        }) else {
            continue;
        };
        let t = match parsed.entry(key) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(serde_json::from_str(t)?),
        };
        match variants::variant_trajectory(e, p, t, catalog, max_chars) {
            Ok(v) => {
                if !parts
                    .entry((e.split.clone(), 0))
                    .or_default()
                    .push_capped(&v.to_string(), max_tokens)?
                {
                    *segment.skipped.entry(super::OVER_TOKEN_CAP.to_string()).or_default() += 1;
                }
            }
            Err(reason) => *segment.skipped.entry(reason.to_string()).or_default() += 1,
        }
    }
    segment.parts = parts.into_iter().map(|(k, p)| (k, p.freeze())).collect();
    segment.rows = match parquet {
        Some(parquet) => chunk_rows(examples, parquet)?,
        None => group_rows(examples)?,
    };
    Ok(segment)
}

/// [`group_rows`] of a chunk of a unit (`super::write`'s chunks): the JSONL lines of the chunk's
/// `examples` and the Parquet parts of `parquet` — the whole unit's rows for its first chunk,
/// none for the others —, so a unit's Parquet rows stay one part (one set of row groups, as
/// large and as well compressed as before chunks) while its lines are written a chunk at a time.
/// A split's [`RowsPart`] then carries no rows in the chunks after the first (empty Parquet
/// bytes, which the writer skips).
fn chunk_rows(examples: &[Example], parquet: &[Example]) -> Result<BTreeMap<String, Rows>> {
    let mut rows: BTreeMap<String, Rows> = BTreeMap::new();
    for (split, examples) in by_split(parquet) {
        let part = crate::emit::rows::rows_part(&examples, &mut std::io::sink())?;
        rows.entry(split.to_string()).or_default().part = part;
    }
    for (split, examples) in by_split(examples) {
        let mut jsonl = Vec::new();
        crate::emit::rows::write_rows_jsonl(&examples, &mut jsonl)?;
        let r = rows.entry(split.to_string()).or_default();
        (r.jsonl, r.lines) = (jsonl.into(), examples.len());
    }
    Ok(rows)
}

/// `examples` by split, each split's in their order.
fn by_split(examples: &[Example]) -> BTreeMap<&str, Vec<&Example>> {
    let mut by_split: BTreeMap<&str, Vec<&Example>> = BTreeMap::new();
    for e in examples {
        by_split.entry(e.split.as_str()).or_default().push(e);
    }
    by_split
}

/// A group's rows of each split ([`Rows`]), the examples of a split in their order.
pub fn group_rows(examples: &[Example]) -> Result<BTreeMap<String, Rows>> {
    let mut by_split: BTreeMap<&str, Vec<&Example>> = BTreeMap::new();
    for e in examples {
        by_split.entry(e.split.as_str()).or_default().push(e);
    }
    let mut rows = BTreeMap::new();
    for (split, examples) in by_split {
        let mut jsonl = Vec::new();
        let part = crate::emit::rows::rows_part(&examples, &mut jsonl)?;
        rows.insert(
            split.to_string(),
            Rows {
                jsonl: jsonl.into(),
                lines: part.rows,
                part,
            },
        );
    }
    Ok(rows)
}

impl Segment {
    /// The store payload's header line: `{"parts": [[split, kind, lines, default bytes, openai
    /// bytes, sidecar bytes], …], "rows": [[split, lines, rows, num_bytes, jsonl bytes, parquet
    /// bytes], …], "skipped": {reason: n}}` (`lines`: of the JSONL; `rows`: of the Parquet part)
    /// and a newline; the payload goes on with every part's three byte strings and every split's
    /// two rows byte strings in header order (copied, never escaped into JSON strings).
    fn head(&self) -> Vec<u8> {
        let parts: Vec<Json> = self
            .parts
            .iter()
            .map(|((split, kind), p)| json!([split, kind, p.lines, p.default.len(), p.openai.len(), p.sidecar.len()]))
            .collect();
        let rows: Vec<Json> = self
            .rows
            .iter()
            .map(|(split, r)| {
                json!([
                    split,
                    r.lines,
                    r.part.rows,
                    r.part.num_bytes,
                    r.jsonl.len(),
                    r.part.parquet.len()
                ])
            })
            .collect();
        let head = json!({"parts": parts, "rows": rows, "skipped": self.skipped});
        let mut out = serde_json::to_vec(&head).expect("serialise");
        out.push(b'\n');
        out
    }

    /// The store payload ([`Segment::encode`]) as its pieces in order — the header line, then
    /// every part's and rows' bytes — for [`crate::store::Store::put_parts`], which writes them
    /// without joining them.
    pub fn encode_parts(&self) -> (Vec<u8>, Vec<&[u8]>) {
        let mut body: Vec<&[u8]> = Vec::new();
        for p in self.parts.values() {
            body.extend([&p.default[..], &p.openai[..], &p.sidecar[..]]);
        }
        for r in self.rows.values() {
            body.extend([&r.jsonl[..], &r.part.parquet[..]]);
        }
        (self.head(), body)
    }

    /// The store payload: [`Segment::encode_parts`] joined.
    pub fn encode(&self) -> Vec<u8> {
        let (mut out, body) = self.encode_parts();
        for b in body {
            out.extend_from_slice(b);
        }
        out
    }

    /// The segment of an [`Segment::encode`]d payload, its parts views into `bytes`; `Err(why)`
    /// when it is not one (a header that does not parse, lengths that do not add up to the
    /// bytes, line counts that differ from the header's).
    pub fn decode(bytes: Bytes) -> Result<Segment, String> {
        type Header = (String, u8, usize, usize, usize, usize);
        type RowsHeader = (String, usize, usize, usize, usize, usize);
        #[derive(serde::Deserialize)]
        struct Head {
            parts: Vec<Header>,
            rows: Vec<RowsHeader>,
            skipped: BTreeMap<String, usize>,
        }
        let newline = bytes.iter().position(|&b| b == b'\n').ok_or("no header")?;
        let head: Head = serde_json::from_slice(&bytes[..newline]).map_err(|e| format!("header: {e}"))?;
        let mut at = newline + 1;
        let mut take = |len: usize| -> Result<Bytes, String> {
            let end = at
                .checked_add(len)
                .filter(|&e| e <= bytes.len())
                .ok_or("bytes cut short")?;
            let view = bytes.slice(at..end);
            at = end;
            Ok(view)
        };
        let mut parts = BTreeMap::new();
        for (split, kind, lines, d, o, s) in head.parts {
            let part = Part {
                default: take(d)?,
                openai: take(o)?,
                sidecar: take(s)?,
                lines,
            };
            // The keyed checksum already vouches for the bytes; this catches a header that
            // disagrees with them without scanning the megabytes of lines: the sidecar (a few
            // dozen bytes a line) is counted, the others must be whole lines.
            let count = part.sidecar.iter().filter(|&&c| c == b'\n').count();
            if count != lines || !whole_lines(&part.default, lines) || !whole_lines(&part.openai, lines) {
                return Err(format!("{split}: not {lines} lines in each file"));
            }
            parts.insert((split, kind), part);
        }
        let mut rows = BTreeMap::new();
        for (split, lines, n, num_bytes, j, p) in head.rows {
            let jsonl = take(j)?;
            if !whole_lines(&jsonl, lines) {
                return Err(format!("{split}: not {lines} rows"));
            }
            let part = RowsPart {
                rows: n,
                num_bytes,
                parquet: take(p)?,
            };
            rows.insert(split, Rows { jsonl, lines, part });
        }
        if at != bytes.len() {
            return Err("bytes beyond the parts".into());
        }
        Ok(Segment {
            parts,
            skipped: head.skipped,
            rows,
        })
    }
}

/// Whether `bytes` can hold `lines` whole lines: empty for none, else ending in a newline.
fn whole_lines(bytes: &[u8], lines: usize) -> bool {
    match bytes.last() {
        None => lines == 0,
        Some(&last) => lines > 0 && last == b'\n',
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_segment_decodes_to_the_same_bytes_and_a_damaged_one_does_not() {
        let mut s = Segment::default();
        let line = r#"{"id":"a/1","messages":[{"role":"user","content":"é\n\"x\""}],"tools":[],"gold_answer":"[]","faults":[]}"#;
        let (mut dev, mut train) = (PartBuf::default(), PartBuf::default());
        dev.push(line).unwrap();
        dev.push(line).unwrap();
        train.push(line).unwrap();
        s.parts.insert(("dev".into(), 0), dev.freeze());
        s.parts.insert(("train".into(), 1), train.freeze());
        s.skipped.insert("over_size_cap".into(), 2);
        let example = Example {
            id: "a/1".into(),
            split: "dev".into(),
            ..Example::default()
        };
        s.rows = group_rows(&[example.clone(), example]).unwrap();
        assert_eq!(s.rows["dev"].part.rows, 2);
        let part = &s.parts[&("dev".to_string(), 0)];
        assert_eq!(part.lines, 2);
        assert!(
            part.sidecar
                .starts_with(br#","id":"a/1","gold_answer":"[]","faults":[]}"#)
        );
        let bytes = Bytes::from(s.encode());
        assert_eq!(Segment::decode(bytes.clone()), Ok(s.clone()));
        assert!(Segment::decode(bytes.slice(..bytes.len() - 1)).is_err(), "cut short");
        let mut longer = bytes.to_vec();
        longer.push(b'x');
        assert!(Segment::decode(longer.into()).is_err(), "bytes beyond the parts");
        assert!(Segment::decode(Bytes::from_static(b"not a header\n")).is_err());
        assert_eq!(
            Segment::decode(Segment::default().encode().into()),
            Ok(Segment::default())
        );
    }
}
