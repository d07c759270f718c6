//! The files of a mix, staged and renamed into place ([`crate::emit::Staging`]):
//!
//! | file | content |
//! |---|---|
//! | `trajectories/train.jsonl` | the rows as their sources wrote them (Hugging Face / TRL chat convention), shuffled |
//! | `trajectories/openai/train.jsonl` + `train.meta.jsonl` | OpenAI's fine-tuning format and its sidecar ([`crate::emit::trajectories::to_openai`]) |
//! | `trajectories/sharegpt/train.jsonl` | ShareGPT / Hermes ([`crate::emit::trajectories::to_sharegpt`]) |
//! | `README.md` | the card ([`super::card`]) |
//! | `report/mix.json` | [`super::MixReport`] |
//! | `MANIFEST.json` | blake3 of every file, of the recipe and of each source file read |

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use rayon::prelude::*;
use serde_json::{Value as Json, json};

use super::{MixReport, SPLIT};
use crate::emit::Staging;
use crate::emit::card::TrajectorySummary;
use crate::emit::trajectories::{to_openai, to_sharegpt};
use crate::recipe::mix::MixRecipe;

/// Rows converted at a time (in parallel), then written in order.
const CHUNK: usize = 1024;

/// Writes the mix's files into `out_dir` (replacing it whole).
pub fn write(
    out_dir: &Path,
    recipe: &MixRecipe,
    lines: &[&[u8]],
    report: &MixReport,
    recipe_path: &Path,
) -> Result<()> {
    let staging = Staging::new(out_dir)?;
    let mut hf = staging.create(&format!("trajectories/{SPLIT}.jsonl"))?;
    let mut openai = staging.create(&format!("trajectories/openai/{SPLIT}.jsonl"))?;
    let mut meta = staging.create(&format!("trajectories/openai/{SPLIT}.meta.jsonl"))?;
    let mut sharegpt = staging.create(&format!("trajectories/sharegpt/{SPLIT}.jsonl"))?;
    for (c, chunk) in lines.chunks(CHUNK).enumerate() {
        let converted: Vec<Result<(Vec<u8>, Vec<u8>, Vec<u8>)>> = chunk
            .par_iter()
            .enumerate()
            .map(|(j, line)| {
                let t: Json = serde_json::from_slice(line).context("a scanned trajectory line is not JSON")?;
                let (o, m) = to_openai(&t, c * CHUNK + j);
                let s = to_sharegpt(&t);
                let line = |v: &Json| {
                    let mut b = serde_json::to_vec(v).expect("serialisable");
                    b.push(b'\n');
                    b
                };
                Ok((line(&o), line(&m), line(&s)))
            })
            .collect();
        for (line, conv) in chunk.iter().zip(converted) {
            let (o, m, s) = conv?;
            hf.write_all(line)?;
            hf.write_all(b"\n")?;
            openai.write_all(&o)?;
            meta.write_all(&m)?;
            sharegpt.write_all(&s)?;
        }
    }
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for f in [hf, openai, meta, sharegpt] {
        let (rel, hash) = f.finish()?;
        files.insert(rel, hash);
    }
    // (the config names carry a digest of the trajectory files: a `datasets` cache keyed by
    // folder and config name never serves another build's rows)
    let digest = TrajectorySummary::digest_of(&files);
    let mut put = |rel: &str, bytes: &[u8]| -> Result<()> {
        let (k, v) = staging.put(rel, bytes)?;
        files.insert(k, v);
        Ok(())
    };
    put("README.md", super::card::card(recipe, report, &digest).as_bytes())?;
    put("report/mix.json", &pretty(&serde_json::to_value(report)?))?;
    let recipe_hash =
        blake3::hash(&std::fs::read(recipe_path).with_context(|| format!("reading {}", recipe_path.display()))?)
            .to_hex()
            .to_string();
    let manifest = json!({
        "dataset": recipe.name,
        "format": "mix",
        "recipe_blake3": recipe_hash,
        "inputs": report.inputs,
        "files": files,
    });
    staging.put("MANIFEST.json", &pretty(&manifest))?;
    staging.finish()
}

fn pretty(v: &Json) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("serialisable");
    b.push(b'\n');
    b
}
