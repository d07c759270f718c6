//! `toolforge eval run`: a model through an OpenAI-compatible endpoint ([`crate::llm`]: cached
//! in the store, bounded concurrency, retries), then scored.
//!
//! Modes: **direct** — one request per row, the model writes the whole call sequence at once
//! ([`super::prompt::direct_messages`], Live API-Bench's direct-invocation setting); **agent** —
//! the tool-calling loop of [`super::agent`] against the live tools. Either mode in either tool
//! format ([`ToolFormat`]: `native` sends `tools` and reads `tool_calls`, `prompt` lists the
//! tools in the system prompt and reads the answer's text), with `shots` solved examples from a
//! train split in the prompt ([`super::prompt`]).
//!
//! **Open world** (`--open-world`, agent mode only; [`super::open_world`]): the model gets only
//! `search_tools` and `call_tool` over the dataset's whole catalog; the report adds the
//! retrieval metrics of its searches (`open_world` in `report.json`, a section of `report.md`).
//!
//! Files (`eval/<run>/`): `predictions.jsonl` (one line per row: `id`, `output` calls, and the
//! episode's `steps`, `failed_calls`, `answer`, `stopped`, `stop_reason`, `turns` (the messages
//! after the system prompt), in the open world `searches` (`[{"query", "top_k", "hits"}]`), or
//! the direct `text`), then what
//! [`super::report::write`] writes, and the page `index.html` ([`super::html`]). A row whose request failed (refused connection, 401; a 500, a
//! malformed body or a `--timeout` after the retries; in agent mode, any turn's request) gets a line with `failed` (the error):
//! it is no answer — excluded from every metric, counted and listed first in the report, and
//! the command exits non-zero while any remain. A run is **resumable**: rows already answered
//! in `predictions.jsonl` are not run again (failed rows are, their new line replacing the
//! old; a line is appended as each row finishes), and every request's answer is in the store
//! (a failed request is not cached), so re-running a finished run, or the same model and prompts under another run
//! name, makes no request. The report's `accounting` says what this invocation did: rows run and
//! resumed, requests, cache hits, retries, failed requests, model turns.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, anyhow};
use rayon::prelude::*;
use serde_json::{Value, json};

use super::execute::Runner;
use super::open_world::OpenWorld;
use super::predictions;
use super::prompt::ToolFormat;
use super::report::{Report, write};
use super::rows::{EvalRow, EvalSet};
use super::score::score;
use crate::llm::{Llm, LlmConfig, block_on, resolve};
use crate::store::Store;

/// How a run is made.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Model name sent with each request.
    pub model: String,
    /// Endpoint base URL (else `OPENAI_BASE_URL`).
    pub base_url: Option<String>,
    /// The environment variable holding the API key (default `OPENAI_API_KEY`).
    pub api_key_env: Option<String>,
    /// `direct` or `agent`.
    pub mode: String,
    /// How the tools reach the model ([`ToolFormat`]: `tools` + `tool_calls`, or the prompt).
    pub tool_format: ToolFormat,
    /// Solved examples in each prompt (`--shots K`; [`super::prompt::shots`]).
    pub shots: usize,
    /// A built dataset whose `train` rows give the shots (default: the evaluated dataset's own
    /// `train` rows).
    pub shots_from: Option<PathBuf>,
    /// Most model turns per agent episode.
    pub max_steps: usize,
    /// Agent mode in the open world (module docs).
    pub open_world: bool,
    /// Rows in flight at once (and requests in flight at most).
    pub concurrency: usize,
    /// Sampling temperature.
    pub temperature: f64,
    /// Completion length cap per request.
    pub max_tokens: u32,
    /// Request seed.
    pub seed: u64,
    /// Attempts per request.
    pub max_attempts: u32,
    /// Time limit per attempt in seconds (`--timeout`; an attempt that runs out is retried like
    /// an HTTP 500).
    pub timeout_secs: f64,
    /// The store caching every answer.
    pub store: PathBuf,
    /// Show a progress bar (on a terminal).
    pub progress: bool,
}

impl Default for RunConfig {
    fn default() -> RunConfig {
        RunConfig {
            model: String::new(),
            base_url: None,
            api_key_env: None,
            mode: "direct".into(),
            tool_format: ToolFormat::Prompt,
            shots: 0,
            shots_from: None,
            max_steps: 8,
            open_world: false,
            concurrency: 4,
            temperature: 0.0,
            max_tokens: 256,
            seed: 0,
            max_attempts: 5,
            timeout_secs: 600.0,
            store: PathBuf::from("eval/.store"),
            progress: true,
        }
    }
}

/// The predictions lines of `path` by id (the last line of an id wins: a retried row's).
fn lines_by_id(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            Some((v["id"].as_str()?.to_string(), l.to_string()))
        })
        .collect()
}

/// Whether a predictions line records a failed request (retried on resume).
fn is_failed(line: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|v| v["failed"].is_string())
}

/// The ids finished (answered) in `path`: a failed row is not finished.
fn done_ids(path: &Path) -> BTreeMap<String, String> {
    lines_by_id(path).into_iter().filter(|(_, l)| !is_failed(l)).collect()
}

/// One row: its predictions line and the model turns it took; `pool` the rows shots come from.
fn run_row(
    llm: &Llm,
    runner: &Runner,
    set: &EvalSet,
    row: &EvalRow,
    cfg: &RunConfig,
    pool: &[&EvalRow],
    world: Option<&OpenWorld>,
) -> (Value, usize) {
    let tools = set.toolkit(row);
    let shots = super::prompt::shots(pool, row, cfg.shots);
    let format = cfg.tool_format;
    if cfg.mode == "agent" {
        let setting = super::agent::Setting {
            max_steps: cfg.max_steps,
            seed: cfg.seed,
            format,
            shots: &shots,
            world,
        };
        let ep = super::agent::episode(llm, runner, row, &tools, setting);
        let output: Vec<Value> = ep
            .calls
            .iter()
            .map(|c| json!({"name": c.name, "arguments": c.arguments, "label": c.label}))
            .collect();
        let mut line = json!({"id": row.id, "output": output, "steps": ep.steps, "failed_calls": ep.failed_calls,
            "answer": ep.answer, "stopped": ep.stopped, "stop_reason": ep.stop_reason.as_str(), "turns": ep.turns});
        if world.is_some() {
            line["searches"] = json!(ep.searches);
        }
        // A request that failed is no answer of the model's: the row is failed, not scored.
        if let Some(why) = ep.stopped.as_deref().filter(|s| s.starts_with("llm:")) {
            line["failed"] = json!(why);
        }
        return (line, ep.steps);
    }
    let messages = super::prompt::direct_messages(row, &tools, format, &shots);
    let offered = match format {
        ToolFormat::Native => super::prompt::openai_tools(&tools),
        ToolFormat::Prompt => vec![],
    };
    match block_on(llm.chat_with_tools(&messages, &offered, cfg.seed)) {
        Ok(c) => {
            let calls = match format {
                ToolFormat::Prompt => super::prompt::parse_calls(&c.text),
                ToolFormat::Native => Some(super::prompt::native_calls(&c.tool_calls, 0)),
            };
            let output: Vec<Value> = calls
                .iter()
                .flatten()
                .map(|c| json!({"name": c.name, "arguments": c.arguments, "label": c.label}))
                .collect();
            let mut line = json!({"id": row.id, "output": output, "parsed": calls.is_some(), "text": c.text});
            if format == ToolFormat::Native {
                line["tool_calls"] = json!(c.tool_calls);
                line["parsed"] = json!(output.len() == c.tool_calls.len());
            }
            (line, 1)
        }
        Err(e) => (json!({"id": row.id, "output": [], "failed": e.to_string()}), 1),
    }
}

/// The retrieval report of an open-world run: the searches of every row with an answer (a
/// failed row, whose request failed, is left out), from its predictions line.
fn open_world_report(
    world: &OpenWorld,
    results: &[super::score::RowResult],
    lines: &BTreeMap<String, String>,
) -> super::open_world::OpenWorldReport {
    let answered: Vec<&str> = results
        .iter()
        .filter(|r| r.status != "failed")
        .map(|r| r.id.as_str())
        .collect();
    let searches = answered
        .iter()
        .filter_map(|id| {
            let v: Value = serde_json::from_str(lines.get(*id)?).ok()?;
            Some((id.to_string(), serde_json::from_value(v["searches"].clone()).ok()?))
        })
        .collect();
    super::open_world::report(world, &answered, &searches)
}

/// Runs `rows` of `set` (module docs), writes `out_dir` and returns the report.
pub fn run(set: &EvalSet, rows: &[&EvalRow], cfg: &RunConfig, run_name: &str, out_dir: &Path) -> Result<Report> {
    if !["direct", "agent"].contains(&cfg.mode.as_str()) {
        return Err(anyhow!("mode {:?}: expected direct or agent", cfg.mode));
    }
    if cfg.open_world && cfg.mode != "agent" {
        return Err(anyhow!(
            "--open-world needs --mode agent (the model searches, then calls)"
        ));
    }
    let world = match cfg.open_world {
        true => Some(OpenWorld::load(&set.dir)?),
        false => None,
    };
    if !(cfg.timeout_secs > 0.0 && cfg.timeout_secs.is_finite()) {
        return Err(anyhow!(
            "--timeout {}: must be a positive number of seconds",
            cfg.timeout_secs
        ));
    }
    let llm_cfg = LlmConfig {
        base_url: cfg.base_url.clone(),
        model: Some(cfg.model.clone()),
        api_key_env: cfg.api_key_env.clone(),
        temperature: cfg.temperature,
        seed: cfg.seed,
        max_tokens: cfg.max_tokens,
        max_concurrency: cfg.concurrency.max(1),
        max_attempts: cfg.max_attempts,
        timeout_secs: cfg.timeout_secs,
        ..LlmConfig::default()
    };
    llm_cfg.validate().map_err(|e| anyhow!("{e}"))?;
    let resolved = resolve(&llm_cfg).map_err(|e| anyhow!("{e} (or pass --base-url)"))?;
    let llm = Llm::new(resolved, Store::open(&cfg.store)?);
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let pred_path = out_dir.join("predictions.jsonl");
    let done = done_ids(&pred_path);
    let todo: Vec<&EvalRow> = rows.iter().copied().filter(|r| !done.contains_key(&r.id)).collect();
    let runner = Runner::new(set);
    let shot_set = match (&cfg.shots_from, cfg.shots) {
        (_, 0) => None,
        (Some(dir), _) => Some(EvalSet::load(dir, None)?),
        (None, _) => None,
    };
    let shot_pool: Vec<&EvalRow> = shot_set
        .as_ref()
        .unwrap_or(set)
        .rows
        .iter()
        .filter(|r| cfg.shots > 0 && r.split == "train" && !r.gold.is_empty())
        .collect();
    if shot_pool.len() < cfg.shots {
        return Err(anyhow!(
            "--shots {}: {} has {} train rows with calls; build the train split and pass --shots-from DIR",
            cfg.shots,
            cfg.shots_from.as_deref().unwrap_or(&set.dir).display(),
            shot_pool.len()
        ));
    }
    let file = Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&pred_path)
            .with_context(|| format!("opening {}", pred_path.display()))?,
    );
    let bar = crate::progress::progress_bar(cfg.progress, todo.len() as u64, "rows");
    bar.set_prefix(format!("eval {}", cfg.mode));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(cfg.concurrency.max(1))
        .build()
        .context("thread pool")?;
    let turns: Vec<usize> = pool.install(|| {
        todo.par_iter()
            .map(|row| {
                let (line, turns) = run_row(&llm, &runner, set, row, cfg, &shot_pool, world.as_ref());
                let mut f = file.lock().expect("predictions file");
                let _ = writeln!(f, "{line}");
                let _ = f.flush();
                bar.inc(1);
                turns
            })
            .collect()
    });
    bar.finish_and_clear();
    // Rewrite in dataset order: the file is deterministic whatever the completion order.
    let lines = lines_by_id(&pred_path);
    let ordered: String = rows
        .iter()
        .filter_map(|r| lines.get(&r.id))
        .map(|l| format!("{l}\n"))
        .collect();
    crate::store::write_atomic(&pred_path, ordered.as_bytes())?;
    let parsed = predictions::parse(&ordered);
    let scored = score(set, rows, &parsed);
    let mut report = Report::new(run_name, &set.name, &cfg.model, &cfg.mode, &scored);
    let (requests, cache_hits, retries, failures) = llm.counters.snapshot();
    let steps: Vec<u64> = lines
        .values()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["steps"].as_u64())
        .collect();
    for (k, v) in [
        ("rows_run", json!(todo.len())),
        ("rows_resumed", json!(rows.len() - todo.len())),
        ("rows_failed", json!(report.failed)),
        ("model_turns", json!(turns.iter().sum::<usize>())),
        ("requests", json!(requests)),
        ("cache_hits", json!(cache_hits)),
        ("retries", json!(retries)),
        ("failed_requests", json!(failures)),
        ("max_steps", json!(cfg.max_steps)),
        ("tool_format", json!(cfg.tool_format.as_str())),
        ("shots", json!(cfg.shots)),
        ("open_world", json!(cfg.open_world)),
        (
            "mean_steps",
            json!(if steps.is_empty() {
                0.0
            } else {
                steps.iter().sum::<u64>() as f64 / steps.len() as f64
            }),
        ),
    ] {
        report.accounting.insert(k.into(), v);
    }
    if let Some(world) = &world {
        report.open_world = Some(open_world_report(world, &scored.rows, &lines));
    }
    write(out_dir, &scored.rows, &report)?;
    super::html::write(out_dir, &report, &scored.rows, rows, &ordered)?;
    Ok(report)
}
