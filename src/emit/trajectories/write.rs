//! The trajectory files of a build ([`Trajectories::write_files`]): every split's clean and
//! faulted files, each also in OpenAI's fine-tuning format with its sidecar ([`super::export`]),
//! concatenated from each group's bytes ([`super::segments`]) read from the store (a shard
//! stored them: [`Trajectories::store_segments`]) or computed from the group's lines
//! ([`super::cached`]).

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use rayon::prelude::*;

use super::prompt::ToolsText;
use super::segments::{self, Part, Segment};
use super::{Runner, cached, trajectories};
use crate::dataset::{Build, Example};
use crate::emit::data_files::SplitRows;
use crate::tools::ToolSpec;
use crate::tools::executor::Executor;

/// The trajectory writer of a build with trajectories: the executable families (SLOT, SEL,
/// REST) and the calls-only `seq` family ([`super::calls`]); `None` for the others.
pub(in crate::emit) struct Trajectories<'b> {
    build: &'b Build,
    /// A family without a back end: trajectories of the gold calls only ([`super::calls`]).
    calls_only: bool,
    executor: Executor,
    endpoints: HashMap<(String, String), crate::tools::rest::Endpoint>,
}

impl<'b> Trajectories<'b> {
    /// The writer of `build`, `None` when its family has no trajectories
    /// ([`crate::emit::card::has_trajectories`]).
    pub(in crate::emit) fn new(build: &'b Build) -> Result<Option<Trajectories<'b>>> {
        if !crate::emit::card::has_trajectories(build) {
            return Ok(None);
        }
        let endpoints = match build.extra_files.get("tools/endpoints.json") {
            Some(bytes) => serde_json::from_slice::<Vec<crate::tools::rest::Endpoint>>(bytes)?
                .into_iter()
                .map(|e| ((e.db_id.clone(), e.name.clone()), e))
                .collect(),
            None => HashMap::new(),
        };
        Ok(Some(Trajectories {
            build,
            calls_only: !crate::emit::has_segments(&build.recipe.format),
            executor: Executor::new(&build.source.databases),
            endpoints,
        }))
    }

    /// Writes `trajectories/<split>.jsonl` (clean) and `trajectories/<split>.faults.jsonl` of
    /// every split in `splits` into `staging`, and under `trajectories/openai/` the same files in
    /// OpenAI's format with their sidecars `<split>[.faults].meta.jsonl` ([`Files`]), and the rows
    /// files `data/<split>.jsonl` and `data/<split>.parquet` ([`SplitRows`]); returns the
    /// trajectories not written, counted by reason, each file's (path, hash) and each split's
    /// size for the dataset card.
    ///
    /// Each group gives each file a [`Segment`] of bytes ([`Trajectories::with_segments`]: read
    /// from the store where a shard stored it, otherwise computed), appended in group order.
    /// The groups are taken a window (about [`WINDOW_EXAMPLES`] verified examples) at a time: a
    /// window's segments are read or computed, groups in parallel, while the previous window's
    /// are written, so a build never holds all its trajectories at once (5,742 Spider-train SEL
    /// rows: 430 MB of lines, issue 17). Within each file, examples come in group order, then in
    /// their group's order (the rows' order).
    ///
    /// Errors: a trajectory that does not execute; [`crate::dataset::BuildError::Unclaimed`] when
    /// the store's scope lets this build compute a missing segment nowhere (a `--merge`: the
    /// segments are then in [`crate::store::Store::missing`]).
    pub(in crate::emit) fn write_files(
        &self,
        splits: &[&str],
        store: Option<&crate::store::Store>,
        staging: &crate::emit::Staging,
    ) -> Result<Written> {
        let mut files: BTreeMap<&str, [Files; 2]> = BTreeMap::new();
        let mut rows: BTreeMap<&str, SplitRows> = BTreeMap::new();
        for split in splits {
            files.insert(
                split,
                [Files::new(staging, split, "")?, Files::new(staging, split, ".faults")?],
            );
            rows.insert(split, SplitRows::new(staging, split)?);
        }
        let mut skipped = Skipped::default();
        let mut absent = 0usize;
        let mut write_window = |window: &[Unit], segments: Vec<Option<Segment>>| -> Result<()> {
            for (Unit { group, .. }, segment) in window.iter().zip(segments) {
                let Some(segment) = segment else {
                    absent += 1;
                    continue;
                };
                for ((split, kind), part) in &segment.parts {
                    if let Some(f) = files.get_mut(split.as_str()) {
                        f[usize::from(*kind)].append(part)?;
                    }
                }
                for (split, r) in &segment.rows {
                    let file = rows.get_mut(split.as_str()).ok_or_else(|| {
                        anyhow::anyhow!("{group}: rows of split {split}, which the build does not have")
                    })?;
                    file.append(&r.jsonl, &r.part)?;
                }
                for (r, n) in segment.skipped {
                    *skipped.by_reason.entry(r.clone()).or_default() += n;
                    *skipped
                        .by_group
                        .entry(group.to_string())
                        .or_default()
                        .entry(r)
                        .or_default() += n;
                }
            }
            Ok(())
        };
        let units = self.units()?;
        self.with_segments(store, false, |segment_of| -> Result<()> {
            let window_segments =
                |window: &[Unit]| -> Result<Vec<Option<Segment>>> { window.par_iter().map(segment_of).collect() };
            let mut previous: Option<(&[Unit], Vec<Option<Segment>>)> = None;
            for window in windows(&units, |u| u.rows) {
                let (wrote, segments) = rayon::join(
                    || previous.take().map_or(Ok(()), |(w, s)| write_window(w, s)),
                    || window_segments(window),
                );
                wrote?;
                previous = Some((window, segments?));
            }
            if let Some((w, s)) = previous {
                write_window(w, s)?;
            }
            Ok(())
        })?;
        if absent > 0 {
            return Err(crate::dataset::BuildError::Unclaimed {
                stage: segments::STAGE.into(),
            }
            .into());
        }
        let mut written = Vec::new();
        for (split, [clean, faulted]) in files {
            skipped.tokens.insert(split.to_string(), clean.tokens.clone());
            written.extend(clean.finish()?);
            if faulted.lines > 0 || !self.calls_only {
                written.extend(faulted.finish()?);
            } else {
                // Calls-only trajectories have no faulted copies: no empty files.
                faulted.discard()?;
            }
        }
        let mut sizes = BTreeMap::new();
        for (split, file) in rows {
            let (size, hashes) = file.finish()?;
            sizes.insert(split.to_string(), size);
            written.extend(hashes);
        }
        Ok((skipped, written, sizes))
    }

    /// Computes and stores the segments `store` lets this build compute (a shard's share,
    /// [`crate::store::Store::claim`] by compile item or group name) that it does not hold yet;
    /// returns how many it stored or found. Errors: a trajectory that does not execute.
    pub(in crate::emit) fn store_segments(&self, store: &crate::store::Store) -> Result<usize> {
        let units = self.units()?;
        self.with_segments(Some(store), true, |segment_of| {
            units
                .par_iter()
                .map(|u| segment_of(u).map(|s| usize::from(s.is_some())))
                .sum()
        })
    }

    /// The build's segment units in file order: one per compile item where a group's examples
    /// are its items' runs ([`Build::item_runs`]; keyed by the item's compile key when segments
    /// are per item, [`crate::emit::segments_per_item`], else by the build key and the item's
    /// name), else one per group. Errors: a SLOT/SEL group without variants whose items do not
    /// account for its examples (a toolforge bug).
    fn units(&self) -> Result<Vec<Unit<'b>>> {
        let build = self.build;
        let per_item = crate::emit::segments_per_item(&build.recipe);
        let counted = |unit: &str| {
            let by_split = build.variant_rows_counted.as_ref().and_then(|c| c.get(unit));
            by_split.map_or(0, |n| n.values().sum::<usize>())
        };
        let mut units = Vec::new();
        for (group, outcome) in &build.groups {
            if self.calls_only {
                // A seq split is one group of up to 94k rows (SeqTopV2 train): cut into chunks of
                // a window each, so a window never holds a whole split's trajectories.
                for (i, examples) in outcome.examples.chunks(WINDOW_EXAMPLES).enumerate() {
                    units.push(Unit {
                        group,
                        examples,
                        rows: examples.len(),
                        key: segments::key(build, &format!("{group}#{i}")),
                        claim: Claim::Later(group),
                        parquet: None,
                    });
                }
                continue;
            }
            let Some(runs) = build.item_runs(group) else {
                anyhow::ensure!(
                    !(per_item && build.items.contains_key(group)),
                    "{group}: its compile items do not account for its examples"
                );
                push_later(&mut units, build, group, group, &outcome.examples, counted(group));
                continue;
            };
            for (item, range) in runs {
                let (examples, counted) = (&outcome.examples[range], counted(&item.name));
                if !per_item {
                    push_later(&mut units, build, group, &item.name, examples, counted);
                    continue;
                }
                units.push(Unit {
                    group,
                    rows: examples.len() + counted,
                    examples,
                    key: segments::item_key(build, item),
                    claim: Claim::Item(item.name.as_str()),
                    parquet: None,
                });
            }
        }
        Ok(units)
    }

    /// Runs `f` with the function giving a [`Unit`]'s [`Segment`]: read from `store` when it
    /// holds it; otherwise, when the store's scope lets this build compute it ([`Store::claim`]
    /// under the compile item's name, or the group's later items, [`crate::dataset::claim_group`]),
    /// built from the unit's trajectory lines ([`cached::GroupLines`]: stored or executed,
    /// examples in parallel) and stored when `keep` (a shard's segments are for the merge, and a
    /// shard stores no lines; a whole build writes its files at once and keeps only the lines);
    /// `None` when it may not.
    ///
    /// [`Store::claim`]: crate::store::Store::claim
    fn with_segments<R>(
        &self,
        store: Option<&crate::store::Store>,
        keep: bool,
        f: impl FnOnce(&(dyn Fn(&Unit) -> Result<Option<Segment>> + Sync)) -> R,
    ) -> R {
        let tools = ToolsText::new(&self.build.catalog);
        let runner = if self.build.recipe.format == "rest" {
            Runner::Rest(&self.endpoints, &self.build.source.databases)
        } else {
            Runner::Tools(&self.executor)
        };
        let cfg = &self.build.recipe.trajectories;
        // A shard stores the segment itself, which holds everything the lines would give a
        // later build: storing the lines too would write the group's trajectories twice.
        // Calls-only trajectories cost less to build than to store and read back.
        let stored = cached::GroupLines::new(self.build, if keep || self.calls_only { None } else { store });
        let compute = |originals: &[&Example]| -> Result<Vec<cached::Line>> {
            originals
                .par_iter()
                .map_init(
                    || None,
                    |conn, e| {
                        if self.calls_only {
                            return Ok(cached::Line::from(super::calls::calls_trajectory(e, &tools.of(e), cfg)));
                        }
                        trajectories(e, &tools, &runner, cfg, self.build.shown.get(&e.id), conn)
                            .map(cached::Line::from)
                            .map_err(|m| anyhow::anyhow!("{}: trajectory: {m}", e.id))
                    },
                )
                .collect()
        };
        let catalog: HashMap<&str, &ToolSpec> = self.build.catalog.iter().map(|t| (t.name.as_str(), t)).collect();
        let claim = |s: &crate::store::Store, unit: &Unit| match unit.claim {
            Claim::Item(item) => s.claim(&unit.key, item),
            Claim::Later(name) => crate::dataset::claim_group(s, &unit.key, name),
        };
        let segment_of = |unit: &Unit| -> Result<Option<Segment>> {
            let key = &unit.key;
            // Calls-only segments (seq) are never stored: every build that writes the files,
            // a merge included, computes them (they cost less to build than to read back).
            if let Some(s) = store.filter(|_| !self.calls_only) {
                // A shard claims before it reads (as the variants stage does): another shard's
                // segment would be read here for nothing.
                let shard = keep && matches!(s.scope(), crate::store::Scope::Shard { .. });
                if shard && !claim(s, unit) {
                    return Ok(None);
                }
                if let Some(segment) = s.load_shared(key, Segment::decode) {
                    return Ok(Some(segment));
                }
                if !shard && !claim(s, unit) {
                    return Ok(None);
                }
            }
            let originals: Vec<&Example> = unit.examples.iter().filter(|e| cached::is_original(e)).collect();
            let lines = stored.of(unit.group, &originals, &compute)?;
            let segment = segments::build_segment(self.build, unit.examples, &lines, &catalog, unit.parquet)?;
            if let (Some(s), true) = (store, keep) {
                let (head, body) = segment.encode_parts();
                let _ = s.put_parts(key, &[&[&head[..]], &body[..]].concat());
            }
            Ok(Some(segment))
        };
        f(&segment_of)
    }
}

/// The files of one split and kind (clean or faulted): the default trajectory file, its OpenAI
/// form and the OpenAI form's sidecar, and how many lines each holds so far.
pub(in crate::emit) struct Files {
    default: crate::emit::StagedFile,
    openai: crate::emit::StagedFile,
    sidecar: crate::emit::StagedFile,
    lines: usize,
    /// Each line's estimated tokens ([`crate::emit::card::tokens`] of its OpenAI form).
    tokens: Vec<u32>,
}

impl Files {
    /// `trajectories/<split><kind>.jsonl`, `trajectories/openai/<split><kind>.jsonl` and
    /// `trajectories/openai/<split><kind>.meta.jsonl` (`kind`: `""` or `".faults"`).
    fn new(staging: &crate::emit::Staging, split: &str, kind: &str) -> Result<Files> {
        Ok(Files {
            default: staging.create(&format!("trajectories/{split}{kind}.jsonl"))?,
            openai: staging.create(&format!("trajectories/openai/{split}{kind}.jsonl"))?,
            sidecar: staging.create(&format!("trajectories/openai/{split}{kind}.meta.jsonl"))?,
            lines: 0,
            tokens: Vec::new(),
        })
    }

    /// Appends one group's `part` to the three files, numbering its sidecar lines from the
    /// lines written so far ([`segments`] module docs).
    fn append(&mut self, part: &Part) -> Result<()> {
        use std::io::Write;
        let mut sidecar = Vec::with_capacity(part.sidecar.len() + 16 * part.lines);
        for tail in part.sidecar.split_inclusive(|&b| b == b'\n') {
            write!(sidecar, "{{\"line\":{}", self.lines)?;
            sidecar.extend_from_slice(tail);
            self.lines += 1;
        }
        // Characters per line: every byte but UTF-8 continuation bytes, up to each newline.
        let mut chars = 0usize;
        for &b in part.openai.iter() {
            if b == b'\n' {
                self.tokens.push(crate::emit::card::tokens(chars));
                chars = 0;
            } else if b & 0xC0 != 0x80 {
                chars += 1;
            }
        }
        for (file, bytes) in [
            (&mut self.default, &part.default[..]),
            (&mut self.openai, &part.openai[..]),
            (&mut self.sidecar, &sidecar[..]),
        ] {
            file.write_bytes(bytes)?;
        }
        Ok(())
    }

    /// Flushes the three files; their (relative path, hash).
    fn finish(self) -> Result<[(String, String); 3]> {
        Ok([self.default.finish()?, self.openai.finish()?, self.sidecar.finish()?])
    }

    /// Removes the three (empty) files from the staging directory.
    fn discard(self) -> Result<()> {
        for f in [self.default, self.openai, self.sidecar] {
            let path = f.path.clone();
            drop(f);
            std::fs::remove_file(&path).map_err(|e| anyhow::anyhow!("removing {}: {e}", path.display()))?;
        }
        Ok(())
    }
}

/// What [`Trajectories::write_files`] wrote: the trajectories it skipped, each file's (path,
/// hash), each split's rows size.
pub(in crate::emit) type Written = (
    Skipped,
    Vec<(String, String)>,
    BTreeMap<String, crate::emit::card::SplitSize>,
);

/// Trajectories not written, counted by reason and by group (database or split) and reason,
/// and the estimated tokens of every clean trajectory written.
#[derive(Debug, Default)]
pub(crate) struct Skipped {
    /// Reason → count.
    pub(crate) by_reason: BTreeMap<String, usize>,
    /// Group → reason → count (groups without a skip absent).
    pub(crate) by_group: BTreeMap<String, BTreeMap<String, usize>>,
    /// Split → each clean trajectory's estimated tokens ([`crate::emit::card::tokens`]), in file
    /// order.
    pub(crate) tokens: BTreeMap<String, Vec<u32>>,
}

/// What one stored segment covers ([`Trajectories::units`]): a group's examples, or the run of
/// them one compile item gave.
struct Unit<'a> {
    /// The group (database) the examples belong to.
    group: &'a str,
    /// The examples, in group order.
    examples: &'a [Example],
    /// Its rows: the examples and the variant rows counted unread
    /// ([`Build::variant_rows_counted`]).
    rows: usize,
    /// The segment's store key ([`segments::key`] or [`segments::item_key`]).
    key: crate::store::StageKey,
    /// How a shard claims the unit.
    claim: Claim<'a>,
    /// `None`: a whole unit (its rows' Parquet part is its own); a chunk of one
    /// ([`push_later`]): the rows whose Parquet part it carries (all the unit's for the first
    /// chunk, none for the others).
    parquet: Option<&'a [Example]>,
}

/// How a [`Unit`]'s segment is claimed ([`crate::store::Store::claim`]).
#[derive(Clone, Copy)]
enum Claim<'a> {
    /// With its compile item (this name): the shard compiling the item computes it.
    Item(&'a str),
    /// Among the later items of this name (a compile item's or a group's), placed by round two's
    /// packing ([`crate::dataset::claim_group`]).
    Later(&'a str),
}

/// Pushes the units of a later-claimed unit `name` of `group` (a group, or a compile item whose
/// segment is not computed with it): one unit when its `examples` are at most
/// [`CHUNK_EXAMPLES`], keyed [`segments::key`] by `name`; otherwise one per chunk
/// ([`chunk_ranges`]), keyed [`segments::chunk_key`], all claimed under `name` so one shard
/// computes them all. A REST database is one compile item (its endpoints are shared across its
/// questions): without chunks its whole segment — every row's lines in three forms — was held at
/// once, and a build's peak memory grew with the questions of its largest database (issue 46:
/// 0.6 MB per question). `counted` (rows counted unread) goes to the first chunk.
fn push_later<'a>(
    units: &mut Vec<Unit<'a>>,
    build: &Build,
    group: &'a str,
    name: &'a str,
    examples: &'a [Example],
    counted: usize,
) {
    let ranges = chunk_ranges(examples);
    let whole = ranges.len() == 1;
    for (k, range) in ranges.into_iter().enumerate() {
        units.push(Unit {
            group,
            rows: range.len() + if k == 0 { counted } else { 0 },
            examples: &examples[range],
            key: if whole {
                segments::key(build, name)
            } else {
                segments::chunk_key(build, name, k)
            },
            claim: Claim::Later(name),
            parquet: (!whole).then_some(if k == 0 { examples } else { &[] }),
        });
    }
}

/// Verified examples per chunk of a later-claimed unit ([`push_later`]): a quarter of a window,
/// so a window's chunks are computed in parallel and the memory a window holds does not depend on
/// the size of the databases in it.
pub const CHUNK_EXAMPLES: usize = WINDOW_EXAMPLES / 4;

/// `examples` cut into consecutive ranges of [`CHUNK_EXAMPLES`] verified examples (the last may
/// hold fewer), each starting at a verified example, so a variant row stays with its parent,
/// which precedes it ([`segments::build_segment`]); one range (possibly empty) when they are
/// few. Only verified examples are counted: a merge that reads no variant row
/// ([`Build::variant_rows_counted`]) cuts at the same places as the shard that computed the
/// chunks with their variant rows.
fn chunk_ranges(examples: &[Example]) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let (mut start, mut originals) = (0, 0);
    for (i, e) in examples.iter().enumerate() {
        if !cached::is_original(e) {
            continue;
        }
        if originals == CHUNK_EXAMPLES {
            ranges.push(start..i);
            (start, originals) = (i, 0);
        }
        originals += 1;
    }
    ranges.push(start..examples.len());
    ranges
}

/// Verified examples per window of [`Trajectories::write_files`]: enough to keep both threads
/// busy, few enough that a window's lines stay small (a SEL line carries its ~61 tools: 40 KB).
pub const WINDOW_EXAMPLES: usize = 512;

/// `units` (groups, or compile items) cut into consecutive windows of about
/// [`WINDOW_EXAMPLES`] examples (`examples` of each): a window ends with the unit that reaches
/// it, so only its last unit takes it past the size.
fn windows<'u, T>(units: &'u [T], examples: impl Fn(&T) -> usize) -> impl Iterator<Item = &'u [T]> {
    let mut rest = units;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut n = 0;
        let mut end = 0;
        while end < rest.len() && n < WINDOW_EXAMPLES {
            n += examples(&rest[end]);
            end += 1;
        }
        let (window, tail) = rest.split_at(end);
        rest = tail;
        Some(window)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Outcome;

    #[test]
    fn windows_cover_the_groups_in_order_about_window_examples_each() {
        let sizes = [0, 3, 700, 1, 200, 200, 200, 5, 0, 1200, 600];
        let names: Vec<String> = (0..sizes.len()).map(|i| format!("g{i:02}")).collect();
        let outcomes: Vec<Outcome> = sizes
            .iter()
            .map(|&n| Outcome {
                examples: vec![Example::default(); n],
                ..Outcome::default()
            })
            .collect();
        let groups: Vec<(&String, &Outcome)> = names.iter().zip(&outcomes).collect();
        let cut: Vec<&[(&String, &Outcome)]> = windows(&groups, |(_, o)| o.examples.len()).collect();
        // Every group once, in order.
        let flat: Vec<&String> = cut.iter().flat_map(|w| w.iter().map(|(g, _)| *g)).collect();
        assert_eq!(flat, names.iter().collect::<Vec<_>>());
        let counts: Vec<usize> = cut
            .iter()
            .map(|w| w.iter().map(|(_, o)| o.examples.len()).sum())
            .collect();
        assert_eq!(counts, vec![703, 601, 1205, 600]);
        // A window holds more than WINDOW_EXAMPLES only through its last group.
        for w in &cut {
            let before_last: usize = w[..w.len() - 1].iter().map(|(_, o)| o.examples.len()).sum();
            assert!(before_last < WINDOW_EXAMPLES, "{before_last}");
        }
        assert_eq!(windows(&groups[..0], |(_, o)| o.examples.len()).count(), 0);
    }

    #[test]
    fn large_units_are_cut_at_verified_examples_the_same_with_or_without_their_variant_rows() {
        let original = |i: usize| Example {
            id: format!("q{i}"),
            ..Example::default()
        };
        let variant = |i: usize| Example {
            id: format!("q{i}-v"),
            meta: Some(serde_json::json!({"variant_of": format!("q{i}")})),
            ..Example::default()
        };
        let n = 2 * CHUNK_EXAMPLES + 5;
        let with: Vec<Example> = (0..n).flat_map(|i| [original(i), variant(i), variant(i)]).collect();
        let without: Vec<Example> = (0..n).map(original).collect();
        let starts =
            |ex: &[Example]| -> Vec<String> { chunk_ranges(ex).into_iter().map(|r| ex[r.start].id.clone()).collect() };
        let expected = vec![
            "q0".to_string(),
            format!("q{CHUNK_EXAMPLES}"),
            format!("q{}", 2 * CHUNK_EXAMPLES),
        ];
        assert_eq!(starts(&with), expected);
        assert_eq!(starts(&without), expected);
        // Every example once, in order; each variant row in its parent's chunk.
        let ranges = chunk_ranges(&with);
        assert_eq!(ranges.first().unwrap().start, 0);
        assert_eq!(ranges.last().unwrap().end, with.len());
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        assert_eq!(chunk_ranges(&without[..CHUNK_EXAMPLES]), vec![0..CHUNK_EXAMPLES]);
        assert_eq!(chunk_ranges(&[]), vec![0..0]);
    }
}
