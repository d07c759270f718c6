//! The trajectory files of a build ([`Trajectories::write_files`]): every split's clean and
//! faulted files, written group by group from lines read from the store or computed
//! ([`super::cached`]), each also in OpenAI's fine-tuning format with its sidecar
//! ([`super::export`]).

use std::collections::{BTreeMap, HashMap};

use anyhow::{Context, Result};
use rayon::prelude::*;
use serde_json::Value as Json;

use super::prompt::ToolsText;
use super::{Runner, cached, trajectories, variants};
use crate::dataset::{Build, Example, Outcome};
use crate::tools::ToolSpec;
use crate::tools::executor::Executor;

/// The trajectory writer of an executable build (SLOT, SEL, REST); `None` for other families.
pub(in crate::emit) struct Trajectories<'b> {
    build: &'b Build,
    executor: Executor,
    endpoints: HashMap<(String, String), crate::tools::rest::Endpoint>,
}

impl<'b> Trajectories<'b> {
    /// The writer of `build`, `None` when its family is not executable.
    pub(in crate::emit) fn new(build: &'b Build) -> Result<Option<Trajectories<'b>>> {
        if !["slot", "sel", "rest"].contains(&build.recipe.format.as_str()) {
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
            executor: Executor::new(&build.source.databases),
            endpoints,
        }))
    }

    /// Writes `trajectories/<split>.jsonl` (clean) and `trajectories/<split>.faults.jsonl` of
    /// every split in `splits` into `staging`, and under `trajectories/openai/` the same files in
    /// OpenAI's format with their sidecars `<split>[.faults].meta.jsonl` ([`Files`]); returns the
    /// trajectories not written, counted by reason, and each file's (path, hash).
    ///
    /// The groups are taken in order, a window of groups (about [`WINDOW_EXAMPLES`] verified
    /// examples) at a time: a window's lines are computed — read from the store where it holds
    /// them ([`cached::GroupLines`]), otherwise executed, groups and examples in parallel — while
    /// the previous window's are written, so a build never holds all its trajectories at once
    /// (5,742 Spider-train SEL rows: 430 MB of lines, issue 17). Within each file, examples come
    /// in group order, then in their group's order (the rows' order). Variant rows get a clean
    /// trajectory rewritten from their parent's ([`variants`]); a variant's parent is in its
    /// group ([`crate::variants`] adds variants beside their parent).
    pub(in crate::emit) fn write_files(
        &self,
        splits: &[&str],
        store: Option<&crate::store::Store>,
        staging: &crate::emit::Staging,
    ) -> Result<(Skipped, Vec<(String, String)>)> {
        let mut files: BTreeMap<&str, [Files; 2]> = BTreeMap::new();
        for split in splits {
            files.insert(
                split,
                [Files::new(staging, split, "")?, Files::new(staging, split, ".faults")?],
            );
        }
        let tools = ToolsText::new(&self.build.catalog);
        let runner = if self.build.recipe.format == "rest" {
            Runner::Rest(&self.endpoints, &self.build.source.databases)
        } else {
            Runner::Tools(&self.executor)
        };
        let cfg = &self.build.recipe.trajectories;
        let stored = cached::GroupLines::new(self.build, store);
        let compute = |originals: &[&Example]| -> Result<Vec<cached::Line>> {
            originals
                .par_iter()
                .map_init(
                    || None,
                    |conn, e| {
                        trajectories(e, &tools, &runner, cfg, self.build.shown.get(&e.id), conn)
                            .map(cached::Line::from)
                            .map_err(|m| anyhow::anyhow!("{}: trajectory: {m}", e.id))
                    },
                )
                .collect()
        };
        let window_lines = |window: &Window| -> Result<Vec<Vec<cached::Line>>> {
            window
                .par_iter()
                .map(|(group, outcome)| {
                    let originals: Vec<&Example> = outcome.examples.iter().filter(|e| cached::is_original(e)).collect();
                    stored.of(group, &originals, compute)
                })
                .collect()
        };
        let catalog: HashMap<&str, &ToolSpec> = self.build.catalog.iter().map(|t| (t.name.as_str(), t)).collect();
        let mut skipped = Skipped::default();
        let mut write_window = |window: &Window, lines: Vec<Vec<cached::Line>>| -> Result<()> {
            for ((group, outcome), lines) in window.iter().zip(lines) {
                self.write_group(group, outcome, &lines, &catalog, &mut files, &mut skipped)?;
            }
            Ok(())
        };
        let groups: Vec<(&String, &Outcome)> = self.build.groups.iter().collect();
        let mut previous: Option<(&Window, Vec<Vec<cached::Line>>)> = None;
        for window in windows(&groups) {
            let (wrote, lines) = rayon::join(
                || previous.take().map_or(Ok(()), |(w, l)| write_window(w, l)),
                || window_lines(window),
            );
            wrote?;
            previous = Some((window, lines?));
        }
        if let Some((w, l)) = previous {
            write_window(w, l)?;
        }
        let mut written = Vec::new();
        for [clean, faulted] in files.into_values() {
            written.extend(clean.finish()?);
            written.extend(faulted.finish()?);
        }
        Ok((skipped, written))
    }

    /// Writes one group's lines (`lines`: one per verified example, in order) to the files of
    /// each example's split, counting skips into `skipped` (under `group` too). `catalog`: the
    /// build's tools by name.
    fn write_group(
        &self,
        group: &str,
        outcome: &Outcome,
        lines: &[cached::Line],
        catalog: &HashMap<&str, &ToolSpec>,
        files: &mut BTreeMap<&str, [Files; 2]>,
        skipped: &mut Skipped,
    ) -> Result<()> {
        let originals = outcome.examples.iter().filter(|e| cached::is_original(e));
        let parents: HashMap<(&str, &str), (&Example, &cached::Line)> = originals
            .zip(lines)
            .map(|(e, l)| ((e.split.as_str(), e.id.as_str()), (e, l)))
            .collect();
        let max_chars = self.build.recipe.trajectories.max_chars;
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
            let Some([clean, faulted]) = files.get_mut(e.split.as_str()) else {
                continue;
            };
            for (text, file) in [(&line.clean, clean), (&line.faulted, faulted)] {
                if let Some(t) = text {
                    file.write(t)?;
                }
            }
            for r in &line.skipped {
                *skipped.by_reason.entry(r.clone()).or_default() += 1;
                *skipped
                    .by_group
                    .entry(group.to_string())
                    .or_default()
                    .entry(r.clone())
                    .or_default() += 1;
            }
        }
        Ok(())
    }
}

/// The files of one split and kind (clean or faulted): the default trajectory file, its OpenAI
/// form and the OpenAI form's sidecar, and how many lines each holds so far.
pub(in crate::emit) struct Files {
    default: crate::emit::StagedFile,
    openai: crate::emit::StagedFile,
    sidecar: crate::emit::StagedFile,
    lines: usize,
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
        })
    }

    /// Appends trajectory `line` (JSON text, the default form) to the three files.
    fn write(&mut self, line: &str) -> Result<()> {
        use std::io::Write;
        let t: Json = serde_json::from_str(line)?;
        let (openai, sidecar) = super::export::to_openai(&t, self.lines);
        for (file, text) in [
            (&mut self.default, line.to_string()),
            (&mut self.openai, openai.to_string()),
            (&mut self.sidecar, sidecar.to_string()),
        ] {
            (file.w.write_all(text.as_bytes()).and_then(|()| file.w.write_all(b"\n")))
                .with_context(|| format!("writing {}", file.path.display()))?;
        }
        self.lines += 1;
        Ok(())
    }

    /// Flushes the three files; their (relative path, hash).
    fn finish(self) -> Result<[(String, String); 3]> {
        Ok([self.default.finish()?, self.openai.finish()?, self.sidecar.finish()?])
    }
}

/// Trajectories not written, counted by reason and by group (database or split) and reason.
#[derive(Debug, Default)]
pub(crate) struct Skipped {
    /// Reason → count.
    pub(crate) by_reason: BTreeMap<String, usize>,
    /// Group → reason → count (groups without a skip absent).
    pub(crate) by_group: BTreeMap<String, BTreeMap<String, usize>>,
}

/// Consecutive groups of a build, by name, in order ([`windows`]).
type Window<'a> = [(&'a String, &'a Outcome)];

/// Verified examples per window of [`Trajectories::write_files`]: enough to keep both threads
/// busy, few enough that a window's lines stay small (a SEL line carries its ~61 tools: 40 KB).
pub const WINDOW_EXAMPLES: usize = 512;

/// `groups` cut into consecutive windows of about [`WINDOW_EXAMPLES`] examples: a window ends
/// with the group that reaches it, so only its last group takes it past the size.
fn windows<'g, 'a>(groups: &'g Window<'a>) -> impl Iterator<Item = &'g Window<'a>> {
    let mut rest = groups;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut n = 0;
        let mut end = 0;
        while end < rest.len() && n < WINDOW_EXAMPLES {
            n += rest[end].1.examples.len();
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
        let cut: Vec<&[(&String, &Outcome)]> = windows(&groups).collect();
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
        assert_eq!(windows(&[]).count(), 0);
    }
}
