//! `toolforge trajectories`: a built trajectory folder converted to one export format.

use std::path::{Path, PathBuf};

/// Converts every trajectory file of `dir` (clean and faulted, in name order) to `format`
/// (`sharegpt`, `openai`, `openai-text`; anything else copies the HF/TRL lines as they are) and
/// writes them to `output` (with the faulted rows beside it as `<stem>.faults.jsonl`) or stdout.
/// `dir` is a built dataset (its `trajectories/`) or a trajectory folder itself.
///
/// # Errors
/// `dir` holds no trajectory files; a line that is not JSON (file and line named); a write fails.
pub fn convert_folder(dir: &Path, format: &str, output: Option<&Path>, faults_only: bool) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::Write as _;
    // (a built dataset's `trajectories/`, else `dir` itself when it is a trajectory folder: the
    // dialogue trajectories' `trajectories/dialogue/`)
    let tdir = match dir.join("trajectories") {
        t if !t.is_dir() && dir.join("README.md").is_file() => dir.to_path_buf(),
        t => t,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&tdir)
        .with_context(|| {
            format!(
                "{}: no trajectories (build an executable dataset first)",
                tdir.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter(|p| !p.to_string_lossy().ends_with(".gold.jsonl"))
        .collect();
    files.sort();
    anyhow::ensure!(
        !files.is_empty(),
        "{}: no trajectory files (build an executable dataset first)",
        tdir.display()
    );
    let is_faults = |p: &PathBuf| p.to_string_lossy().ends_with(".faults.jsonl");
    let render = |want_faults: bool| -> anyhow::Result<Vec<u8>> {
        let mut out: Vec<u8> = Vec::new();
        for f in files.iter().filter(|f| is_faults(f) == want_faults) {
            let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            for (i, line) in text.lines().enumerate() {
                let t: serde_json::Value =
                    serde_json::from_str(line).with_context(|| format!("{} line {}: not JSON", f.display(), i + 1))?;
                let row = match format {
                    "sharegpt" => super::to_sharegpt(&t),
                    "openai" => super::to_openai(&t, i).0,
                    "openai-text" => super::to_openai_text(&t),
                    _ => t,
                };
                serde_json::to_writer(&mut out, &row)?;
                out.push(b'\n');
            }
        }
        Ok(out)
    };
    let out = render(faults_only)?;
    let write_file = |p: &Path, bytes: &[u8]| -> anyhow::Result<()> {
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, p).with_context(|| format!("renaming to {}", p.display()))
    };
    if let (Some(p), false) = (output, faults_only) {
        let stem = p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let sibling = p.with_file_name(format!("{stem}.faults.jsonl"));
        write_file(&sibling, &render(true)?)?;
    }
    match output {
        Some(p) => write_file(p, &out)?,
        None => {
            let _ = std::io::stdout().write_all(&out);
        }
    }
    Ok(())
}
