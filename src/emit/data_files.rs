//! The rows files of a split, `data/<split>.jsonl` and `data/<split>.parquet`, written group by
//! group ([`SplitRows`]): each group's JSONL lines appended, its Parquet part spliced in
//! ([`super::rows::ParquetConcat`]). The executable families take each group's rows from its
//! segment ([`super::trajectories::segments`], stored by a shard or computed); the others
//! encode them here ([`write_rows`]). Either way a split's files are the same bytes for a whole
//! build and a merge.

use std::collections::BTreeMap;

use anyhow::{Context, Result};

use super::card::SplitSize;
use super::rows::{ParquetConcat, RowsPart, rows_part};
use super::{StagedFile, Staging};
use crate::dataset::{Build, Example};

/// The two rows files of one split being written, and its size so far.
pub(super) struct SplitRows {
    jsonl: StagedFile,
    parquet: ParquetConcat<StagedFile>,
    num_bytes: usize,
}

impl SplitRows {
    /// `data/<split>.jsonl` and `data/<split>.parquet` in `staging`.
    pub(super) fn new(staging: &Staging, split: &str) -> Result<SplitRows> {
        Ok(SplitRows {
            jsonl: staging.create(&format!("data/{split}.jsonl"))?,
            parquet: ParquetConcat::new(staging.create(&format!("data/{split}.parquet"))?),
            num_bytes: 0,
        })
    }

    /// Appends one group's rows: its `jsonl` lines and its Parquet `part`.
    pub(super) fn append(&mut self, jsonl: &[u8], part: &RowsPart) -> Result<()> {
        self.jsonl.write_bytes(jsonl)?;
        self.append_part(part)
    }

    fn append_part(&mut self, part: &RowsPart) -> Result<()> {
        // A chunk after a unit's first carries no Parquet rows ([`RowsPart::default`]).
        if part.parquet.is_empty() {
            return Ok(());
        }
        self.parquet.append(&part.parquet)?;
        self.num_bytes += part.num_bytes;
        Ok(())
    }

    /// Closes both files: the split's size for the dataset card and each file's (path, hash).
    pub(super) fn finish(self) -> Result<(SplitSize, [(String, String); 2])> {
        let parquet = self.parquet.finish()?;
        let path = parquet.path.clone();
        let parquet = parquet.finish()?;
        let parquet_bytes = std::fs::metadata(&path)
            .with_context(|| format!("reading {}", path.display()))?
            .len() as usize;
        let size = SplitSize {
            num_bytes: self.num_bytes,
            parquet_bytes,
        };
        Ok((size, [parquet, self.jsonl.finish()?]))
    }
}

/// The rows files of every split of `build`, encoded here group by group (families without
/// segments: seq, catalog, BFCL, whose groups are splits); each split's size and each file's
/// (path, hash). The JSONL lines go straight to the file (a seq train split's 250 MB are never
/// held), the Parquet part beside them.
pub(super) fn write_rows(
    staging: &Staging,
    build: &Build,
) -> Result<(BTreeMap<String, SplitSize>, Vec<(String, String)>)> {
    let mut files: BTreeMap<String, SplitRows> = BTreeMap::new();
    for outcome in build.groups.values() {
        let mut by_split: BTreeMap<&str, Vec<&Example>> = BTreeMap::new();
        for e in &outcome.examples {
            by_split.entry(e.split.as_str()).or_default().push(e);
        }
        for (split, examples) in by_split {
            let file = match files.entry(split.to_string()) {
                std::collections::btree_map::Entry::Occupied(f) => f.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => v.insert(SplitRows::new(staging, split)?),
            };
            let part = rows_part(&examples, &mut file.jsonl.w)
                .with_context(|| format!("writing {}", file.jsonl.path.display()))?;
            file.append_part(&part)?;
        }
    }
    let mut sizes = BTreeMap::new();
    let mut written = Vec::new();
    for (split, file) in files {
        let (size, hashes) = file.finish()?;
        sizes.insert(split, size);
        written.extend(hashes);
    }
    Ok((sizes, written))
}
