//! Reading MixATIS / MixSNIPS files: the AGIF one-token-per-line format and the GL-GIN
//! `seq.in` / `seq.out` / `label` triple, into [`Record`]s; malformed records become
//! [`BadRecord`]s.

#[allow(unused_imports)]
use super::*;

/// One example as read from the source.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Record {
    /// 0-based record index in its file(s).
    pub(super) index: usize,
    pub(super) tokens: Vec<String>,
    /// IOB tags, one per token; `None` when the split has no tag file.
    pub(super) tags: Option<Vec<String>>,
    /// Intents in clause order.
    pub(super) intents: Vec<String>,
}

/// Where a split's records come from.
#[derive(Debug, Clone)]
pub(super) enum SplitFiles {
    Agif(PathBuf),
    GlGin {
        seq_in: PathBuf,
        seq_out: Option<PathBuf>,
        label: PathBuf,
    },
}

impl SplitFiles {
    pub(super) fn paths(&self) -> Vec<PathBuf> {
        match self {
            SplitFiles::Agif(p) => vec![p.clone()],
            SplitFiles::GlGin { seq_in, seq_out, label } => {
                let mut v = vec![seq_in.clone()];
                v.extend(seq_out.clone());
                v.push(label.clone());
                v
            }
        }
    }
}

pub(super) fn split_files(root: &Path, split: &str) -> Option<SplitFiles> {
    let agif = root.join(format!("{split}.txt"));
    if agif.is_file() {
        return Some(SplitFiles::Agif(agif));
    }
    let dir = root.join(split);
    let seq_in = dir.join("seq.in");
    let label = dir.join("label");
    if seq_in.is_file() && label.is_file() {
        let seq_out = Some(dir.join("seq.out")).filter(|p| p.is_file());
        return Some(SplitFiles::GlGin { seq_in, seq_out, label });
    }
    None
}

/// The reference corpus root (`atis` or `snips`), when present.
pub(super) fn reference_root(source: &ResolvedSource) -> Option<PathBuf> {
    let (env, dir) = match source.manifest.format.as_str() {
        "mixatis" => ("TOOLFORGE_ATIS", "atis"),
        _ => ("TOOLFORGE_SNIPS", "snips"),
    };
    let candidates = match std::env::var_os(env) {
        Some(p) => vec![PathBuf::from(p)],
        None => vec![source.root.join("..").join(dir)],
    };
    candidates
        .into_iter()
        .find(|p| SPLITS.iter().any(|s| p.join(format!("{s}.txt")).is_file()))
}

pub(super) fn corpus_name(source: &ResolvedSource) -> &'static str {
    if source.manifest.format == "mixatis" {
        "ATIS"
    } else {
        "SNIPS"
    }
}

/// Every file the conversion reads.
pub fn inputs(source: &ResolvedSource) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = SPLITS
        .iter()
        .filter_map(|s| split_files(&source.root, s))
        .flat_map(|f| f.paths())
        .collect();
    if let Some(r) = reference_root(source) {
        files.extend(
            SPLITS
                .iter()
                .map(|s| r.join(format!("{s}.txt")))
                .filter(|p| p.is_file()),
        );
    }
    files
}

/// Reads an AGIF file: `token TAG` lines, an intent line, a blank line.
pub(super) fn read_agif(path: &Path, bad: &mut Vec<BadRecord>) -> Result<Vec<Record>, CorpusError> {
    let text = crate::corpus::read_text(path)?;
    Ok(parse_agif(&text, &path.display().to_string(), bad))
}

pub(super) fn parse_agif(text: &str, file: &str, bad: &mut Vec<BadRecord>) -> Vec<Record> {
    let mut out = Vec::new();
    let mut index = 0;
    let (mut tokens, mut tags) = (Vec::new(), Vec::new());
    let mut error: Option<String> = None;
    let mut start_line = 1;
    let flush_bad = |index: &mut usize, message: String, bad: &mut Vec<BadRecord>| {
        bad.push(BadRecord {
            file: file.to_string(),
            record: *index,
            message,
        });
        *index += 1;
    };
    for (n, line) in text.lines().enumerate() {
        // Invalid UTF-8 in a token or intent line: the whole record is bad (flushed at its end).
        if let Some(message) = crate::corpus::invalid_line(line) {
            error.get_or_insert(format!("line {}: {message}", n + 1));
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.len() {
            0 => {
                if !tokens.is_empty() || error.is_some() {
                    let msg = error.take().unwrap_or_else(|| {
                        format!(
                            "line {}: record starting at line {start_line} has no intent line",
                            n + 1
                        )
                    });
                    flush_bad(&mut index, msg, bad);
                    tokens.clear();
                    tags.clear();
                }
                start_line = n + 2;
            }
            1 => {
                if let Some(msg) = error.take() {
                    flush_bad(&mut index, msg, bad);
                } else if tokens.is_empty() {
                    flush_bad(
                        &mut index,
                        format!("line {}: intent line {:?} without tokens", n + 1, fields[0]),
                        bad,
                    );
                } else {
                    out.push(Record {
                        index,
                        tokens: std::mem::take(&mut tokens),
                        tags: Some(std::mem::take(&mut tags)),
                        intents: fields[0].split('#').map(str::to_string).collect(),
                    });
                    index += 1;
                }
                tokens.clear();
                tags.clear();
                start_line = n + 2;
            }
            2 => {
                tokens.push(fields[0].to_string());
                tags.push(fields[1].to_string());
            }
            _ => {
                if error.is_none() {
                    error = Some(format!(
                        "line {}: expected `token TAG`, found {} fields",
                        n + 1,
                        fields.len()
                    ));
                }
            }
        }
    }
    if !tokens.is_empty() || error.is_some() {
        let msg =
            error.unwrap_or_else(|| format!("record starting at line {start_line} has no intent line (end of file)"));
        flush_bad(&mut index, msg, bad);
    }
    out
}

/// Reads a GL-GIN split: line `i` of `seq.in`, `seq.out` (optional) and `label` is record `i`.
pub(super) fn read_glgin(
    seq_in: &Path,
    seq_out: Option<&Path>,
    label: &Path,
    bad: &mut Vec<BadRecord>,
) -> Result<Vec<Record>, CorpusError> {
    let read = |p: &Path| crate::corpus::read_text(p);
    let ins = read(seq_in)?;
    let outs = seq_out.map(read).transpose()?;
    let labels = read(label)?;
    let ins: Vec<&str> = ins.lines().collect();
    let labels: Vec<&str> = labels.lines().collect();
    let outs: Option<Vec<&str>> = outs.as_deref().map(|o| o.lines().collect());
    let file = seq_in.display().to_string();
    let n = ins.len().max(labels.len()).max(outs.as_ref().map_or(0, Vec::len));
    let mut records = Vec::new();
    for i in 0..n {
        let tokens: Vec<String> = ins
            .get(i)
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let intent = labels.get(i).map(|l| l.trim()).unwrap_or("");
        let tags: Option<Vec<String>> = outs.as_ref().map(|o| {
            o.get(i)
                .map(|l| l.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default()
        });
        if tokens.is_empty() && intent.is_empty() && tags.as_ref().is_none_or(Vec::is_empty) {
            continue;
        }
        let invalid = [ins.get(i), labels.get(i), outs.as_ref().and_then(|o| o.get(i))]
            .into_iter()
            .flatten()
            .find_map(|l| crate::corpus::invalid_line(l));
        let problem = if let Some(message) = invalid {
            Some(message)
        } else if tokens.is_empty() {
            Some("no tokens in seq.in".to_string())
        } else if intent.is_empty() || intent.contains(char::is_whitespace) {
            Some(format!("label line {intent:?} is not one `#`-joined intent list"))
        } else {
            tags.as_ref()
                .filter(|t| t.len() != tokens.len())
                .map(|t| format!("{} tokens but {} tags in seq.out", tokens.len(), t.len()))
        };
        match problem {
            Some(message) => records_bad(bad, &file, i, message),
            None => records.push(Record {
                index: i,
                tokens,
                tags,
                intents: intent.split('#').map(str::to_string).collect(),
            }),
        }
    }
    Ok(records)
}

pub(super) fn records_bad(bad: &mut Vec<BadRecord>, file: &str, i: usize, message: String) {
    bad.push(BadRecord {
        file: file.to_string(),
        record: i,
        message: format!("line {}: {message}", i + 1),
    });
}
