//! The `toolforge` command line.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// toolforge: compile annotated corpora (text-to-SQL, NLU, dialogue) into verified
/// tool-calling datasets, and serve their tools live.
#[derive(Parser)]
#[command(version, about, long_about = None,
    after_help = "Each command's flags: `toolforge <command> --help` (e.g. `toolforge serve --help`).\n\
                  Recipes are `recipes/<name>.toml` of the project (found from any directory);\n\
                  corpora are looked up as each `sources/<name>.toml` says (../shared/corpora or $TOOLFORGE_*)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build a dataset from a recipe (e.g. `recipes/slot-bird.toml`) into `out/<name>/`.
    Build {
        /// Recipe file, or a recipe name looked up as `recipes/<name>.toml`.
        recipe: String,
        /// Output root (default: `<project>/out`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Store: a directory or `s3://bucket/prefix` (credentials and endpoint from the usual
        /// AWS_* variables). Default: $TOOLFORGE_STORE, else the recipe's `store`, else
        /// `<project>/out/.store`.
        #[arg(long)]
        store: Option<String>,
        /// Compute only shard I of N (0-based, e.g. `0/4`) of the stage items (per database for
        /// text-to-SQL, the conversion for seq/catalog) into the store; write no dataset.
        #[arg(long, value_name = "I/N", value_parser = toolforge::pipeline::parse_shard, conflicts_with = "merge")]
        shard: Option<(u64, u64)>,
        /// After sharded builds: compute nothing, write the dataset from the store; fails naming
        /// every item missing from it (give N to also name each item's shard).
        #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "0")]
        merge: Option<u64>,
        /// Hash the inputs once, store the plan, print the assignment over `--shards N` shards.
        #[arg(long, conflicts_with_all = ["shard", "merge"])]
        plan: bool,
        /// With `--plan`: the shard count (default 1).
        #[arg(long, value_name = "N", requires = "plan", value_parser = clap::value_parser!(u64).range(1..))]
        shards: Option<u64>,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
        /// Write no page (`report/index.html` and its data files).
        #[arg(long)]
        no_html: bool,
    },
    /// Serve a built dataset's tools over HTTP: REST endpoints (`GET <path>`), SLOT/SEL tools
    /// (`POST /sessions`, `POST /tools/{name}`), MCP at `/mcp` (or stdio with `--mcp`),
    /// `GET /openapi.json`, `GET /healthz`.
    /// Build the dataset first (`toolforge build RECIPE`). Stops on SIGINT/SIGTERM.
    Serve {
        /// Recipe name or file (serves `<out>/<name>/`), or a built dataset directory.
        recipe: String,
        /// Bind address.
        #[arg(long, default_value = "127.0.0.1")]
        host: std::net::IpAddr,
        /// Port (0 picks a free one; the chosen address is printed).
        #[arg(long, default_value_t = 8000)]
        port: u16,
        /// Output root holding the built dataset (default: `<project>/out`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Directory holding `<db>/<db>.sqlite` (default: the recipe's source).
        #[arg(long)]
        databases: Option<PathBuf>,
        /// Serve the tools over MCP on stdin/stdout instead of HTTP (the HTTP server always has
        /// MCP streamable HTTP at `/mcp`).
        #[arg(long)]
        mcp: bool,
        /// Limits, budgets and exposure.
        #[command(flatten)]
        flags: toolforge::serve::flags::ServeFlags,
    },
    /// Write a built dataset's trajectories (`<dir>/trajectories/*.jsonl`, the Hugging Face / TRL
    /// chat convention) in a format: `sharegpt` (ShareGPT / Hermes function-calling style),
    /// `openai` (OpenAI's fine-tuning format exactly: `messages`, `tools`, `parallel_tool_calls`,
    /// arguments as JSON text; no sidecar), `openai-text` (the same with each tool's `parameters`
    /// as JSON text: one Arrow type per field, what `datasets` 3.x loads) or `hf` (the files as
    /// they are).
    Trajectories {
        /// A built dataset directory, e.g. `out/slot-spider`, or a trajectory folder itself,
        /// e.g. `out/seq-sgd/trajectories/dialogue` (its `*.gold.jsonl` sidecars are skipped).
        dir: PathBuf,
        /// Output format.
        #[arg(long, value_parser = ["hf", "openai", "openai-text", "sharegpt"], default_value = "sharegpt")]
        format: String,
        /// Output file of the clean trajectories (default: standard output); the faulted ones go
        /// to a sibling `<stem>.faults.jsonl`, never into the same file.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Write the faulted trajectories (`*.faults.jsonl`) instead of the clean ones.
        #[arg(long)]
        faults: bool,
    },
    /// Check a built dataset: SLOT/SEL rows are re-executed through the executor, REST rows are
    /// sent as HTTP requests to a live server on 127.0.0.1; each result is compared with the
    /// row's `gold_answer`. Exit 1 on any mismatch.
    Verify {
        /// A built dataset directory, e.g. `out/slot-bird`.
        dir: PathBuf,
        /// Directory holding `<db>/<db>.sqlite` (default: the recipe's source, from MANIFEST.json).
        #[arg(long)]
        databases: Option<PathBuf>,
    },
    /// Evaluate models on a built dataset: `eval score` scores a predictions file, `eval run`
    /// runs a model through an OpenAI-compatible endpoint and scores it. Results go to
    /// `eval/<run>/` (rows.jsonl, report.json, report.md, charts/).
    Eval {
        #[command(subcommand)]
        command: EvalCommand,
    },
    /// Build the BM25 tool index over built datasets' catalogs; search it (`--query`) or time it.
    Index(toolforge::retrieval::cli::IndexArgs),
    /// Write a built dataset's tool-retrieval dataset (BEIR layout) to `out/<name>-retrieval/`.
    Retrieval(toolforge::retrieval::cli::RetrievalArgs),
}

/// Options every `eval` subcommand shares.
#[derive(clap::Args)]
struct EvalCommon {
    /// Output root (default `eval`); the run writes `<out>/<run>/`.
    #[arg(long, default_value = "eval")]
    out: PathBuf,
    /// Run name (default: dataset and predictions file / model and mode).
    #[arg(long)]
    run: Option<String>,
    /// Directory holding `<db>/<db>.sqlite` (default: the recipe's source, from MANIFEST.json).
    #[arg(long)]
    databases: Option<PathBuf>,
    /// Only the first N rows (after `--ids`).
    #[arg(long)]
    limit: Option<usize>,
    /// Only these row ids (comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    ids: Vec<String>,
    /// Only rows of these splits (comma-separated or repeated; `all` for every split). Default:
    /// the `test` split of a dataset that has several splits and a `test` one (the papers report
    /// test-split numbers), else every row; with `--ids`, every split.
    #[arg(long, value_delimiter = ',')]
    split: Vec<String>,
}

#[derive(Subcommand)]
enum EvalCommand {
    /// Score a predictions file (JSON Lines: `id` plus `output` calls or OpenAI `tool_calls`)
    /// against a built dataset with every metric that applies.
    Score {
        /// A built dataset directory (e.g. `out/slot-spider`) or recipe name.
        dataset: String,
        /// The predictions file.
        predictions: PathBuf,
        #[command(flatten)]
        common: EvalCommon,
    },
    /// Run a model through an OpenAI-compatible endpoint on a built dataset, write its
    /// predictions, then score them. Resumable; every answer is cached in the store, so a
    /// re-run makes no request.
    Run {
        /// A built dataset directory (e.g. `out/rest-spider`) or recipe name.
        dataset: String,
        /// Model name sent to the endpoint.
        #[arg(long)]
        model: String,
        /// `direct` (the whole call sequence at once) or `agent` (a tool-calling loop against the
        /// live tools).
        #[arg(long, value_parser = ["direct", "agent"], default_value = "direct")]
        mode: String,
        /// How the model gets the tools: `native` sends them as the request's `tools` (OpenAI
        /// function schema) and reads `tool_calls`; `prompt` lists them in the system prompt and
        /// reads calls from the text. Both show the full specification.
        #[arg(long, value_parser = ["native", "prompt"], default_value = "prompt")]
        tool_format: String,
        /// Solved examples (request and gold calls) from the train split in each prompt.
        #[arg(long, default_value_t = 0)]
        shots: usize,
        /// A built dataset whose train rows give the shots (default: the evaluated dataset's).
        #[arg(long)]
        shots_from: Option<PathBuf>,
        /// OpenAI-compatible base URL (default: `OPENAI_BASE_URL`).
        #[arg(long)]
        base_url: Option<String>,
        /// Environment variable holding the API key.
        #[arg(long, default_value = "OPENAI_API_KEY")]
        api_key_env: String,
        /// Most model turns per agent episode.
        #[arg(long, default_value_t = 8)]
        max_steps: usize,
        /// Agent mode in the open world (ToolGym's setting): the model gets only `search_tools`
        /// and `call_tool` over the dataset's whole catalog, as `toolforge serve --open-world`
        /// lists them; the report adds the retrieval metrics of its searches.
        #[arg(long)]
        open_world: bool,
        /// Rows (and requests) in flight at once.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// Sampling temperature.
        #[arg(long, default_value_t = 0.0)]
        temperature: f64,
        /// Completion length cap per request.
        #[arg(long, default_value_t = 256)]
        max_tokens: u32,
        /// Request seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Time limit per request attempt in seconds; an attempt that runs out is retried (up to
        /// 5 attempts), then the row is failed.
        #[arg(long, default_value_t = 600.0)]
        timeout: f64,
        /// Run N times, run i with request seed `--seed` + i (each in `<run>/repeat-<i>/`), then
        /// report mean ± std per metric, pass@k of completion and per-row agreement
        /// (`<run>/repeats.json`, `repeats.md`).
        #[arg(long, default_value_t = 1)]
        repeats: usize,
        /// Store caching the model's answers (default `<out>/.store`).
        #[arg(long)]
        store: Option<PathBuf>,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
        #[command(flatten)]
        common: EvalCommon,
    },
    /// Replay every selected row's gold calls through agent mode's tool step without a model
    /// (rendered, parsed, run live, observed): checks the live tools and prints the per-step
    /// overhead agent mode adds to the model's time.
    Replay {
        /// A built dataset directory or recipe name.
        dataset: String,
        #[command(flatten)]
        common: EvalCommon,
    },
    /// Compare runs on their common rows: the table, BFCL's unweighted category mean, paired
    /// bootstrap intervals of the differences and McNemar's test against the first run, the
    /// breakdowns, one SVG chart per metric (compare.md, charts/).
    Report {
        /// Run directories (`eval/<run>`); the first is the baseline.
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        /// Compare runs over different datasets or row sets (on their common rows) instead of
        /// refusing.
        #[arg(long)]
        allow_different_rows: bool,
        /// Output directory.
        #[arg(long, default_value = "eval/compare")]
        out: PathBuf,
        /// Also write `<out>/index.html`: the comparison's page, linking each run's own
        /// `index.html`.
        #[arg(long)]
        html: bool,
    },
    /// Recall@1/5/10, nDCG@10 and MRR of BM25 (or a TREC run) on retrieval datasets.
    Retrieval(toolforge::eval::retrieval::RetrievalArgs),
}

/// A recipe argument as a file: see [`toolforge::recipe::resolve_recipe`] (names resolve against
/// the project root from any directory; unknown names list the available recipes).
fn recipe_path(r: &str) -> Result<PathBuf, toolforge::recipe::RecipeError> {
    toolforge::recipe::resolve_recipe(r)
}

/// A built dataset directory: `r` itself if it holds a MANIFEST.json (or is a retrieval dataset
/// in the BEIR layout, `corpus.jsonl`), else `<out>/<recipe name>`.
fn dataset_dir(r: &str, out: Option<&std::path::Path>) -> anyhow::Result<PathBuf> {
    let p = PathBuf::from(r);
    if p.join("MANIFEST.json").is_file() || p.join("corpus.jsonl").is_file() {
        return Ok(p);
    }
    let path = recipe_path(r)?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let root = toolforge::pipeline::project_root(&path);
    Ok(out.map(PathBuf::from).unwrap_or_else(|| root.join("out")).join(name))
}

fn eval_selection(common: &EvalCommon) -> toolforge::eval::score::Selection {
    toolforge::eval::score::Selection {
        ids: (!common.ids.is_empty()).then(|| common.ids.iter().cloned().collect()),
        limit: common.limit,
        splits: (!common.split.is_empty()).then(|| common.split.iter().cloned().collect()),
    }
}

fn eval(command: EvalCommand) -> anyhow::Result<()> {
    use toolforge::eval::rows::EvalSet;
    match command {
        EvalCommand::Score {
            dataset,
            predictions,
            common,
        } => {
            let dir = dataset_dir(&dataset, None)?;
            let set = EvalSet::load(&dir, common.databases.as_deref())?;
            let stem = predictions
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let run = common.run.clone().unwrap_or_else(|| format!("{}-{stem}", set.name));
            let out = common.out.join(&run);
            let report = toolforge::eval::score::score_file(&set, &predictions, &eval_selection(&common), &run, &out)?;
            print!(
                "{}",
                toolforge::eval::report::table(&[(report.model.clone(), &report.totals)])
            );
            println!(
                "eval: {} rows (split {}), {} scored, {} missing, {} problems; wrote {}",
                report.rows,
                report.splits.join(", "),
                report.scored,
                report.missing,
                report.problems.len(),
                out.display()
            );
            println!("eval: page {}", out.join("index.html").display());
            Ok(())
        }
        EvalCommand::Replay { dataset, common } => {
            let dir = dataset_dir(&dataset, None)?;
            let set = EvalSet::load(&dir, common.databases.as_deref())?;
            let sel = eval_selection(&common);
            let rows = sel.rows(&set);
            let runner = toolforge::eval::execute::Runner::new(&set);
            let r = toolforge::eval::agent::replay(&runner, &rows);
            println!(
                "replay {}: {} rows, {} steps, {} failed, {:.3} s, {:.1} µs per step",
                set.name,
                r.rows,
                r.steps,
                r.failed_steps,
                r.seconds,
                r.seconds * 1e6 / r.steps.max(1) as f64
            );
            if r.failed_steps > 0 {
                anyhow::bail!("{} gold steps failed", r.failed_steps);
            }
            Ok(())
        }
        EvalCommand::Retrieval(args) => args.run().map(|r| println!("{r:#}")),
        EvalCommand::Report {
            runs,
            out,
            allow_different_rows,
            html,
        } => {
            print!(
                "{}",
                toolforge::eval::compare::compare(&runs, &out, allow_different_rows)?
            );
            println!("eval: wrote {}", out.display());
            if html {
                println!(
                    "eval: page {}",
                    toolforge::eval::html::write_compare(&out, &runs)?.display()
                );
            }
            Ok(())
        }
        EvalCommand::Run {
            dataset,
            model,
            mode,
            tool_format,
            shots,
            shots_from,
            base_url,
            api_key_env,
            max_steps,
            open_world,
            concurrency,
            temperature,
            max_tokens,
            seed,
            timeout,
            repeats,
            store,
            quiet,
            common,
        } => {
            let dir = dataset_dir(&dataset, None)?;
            let set = EvalSet::load(&dir, common.databases.as_deref())?;
            let safe: String = model
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let run = common.run.clone().unwrap_or_else(|| {
                format!(
                    "{}-{safe}-{mode}{}",
                    set.name,
                    if open_world { "-open-world" } else { "" }
                )
            });
            let out = common.out.join(&run);
            let cfg = toolforge::eval::run::RunConfig {
                model,
                base_url,
                api_key_env: Some(api_key_env),
                mode,
                tool_format: toolforge::eval::prompt::ToolFormat::parse(&tool_format)?,
                shots,
                shots_from,
                max_steps,
                open_world,
                concurrency,
                temperature,
                max_tokens,
                seed,
                timeout_secs: timeout,
                store: store.unwrap_or_else(|| common.out.join(".store")),
                progress: !quiet,
                ..Default::default()
            };
            let sel = eval_selection(&common);
            let rows = sel.rows(&set);
            if repeats > 1 {
                let r = toolforge::eval::repeats::run(&set, &rows, &cfg, &run, &out, repeats)?;
                print!("{}", toolforge::eval::repeats::markdown(&r, &run));
                println!("eval: wrote {}", out.join("repeats.json").display());
                if r.failed > 0 {
                    anyhow::bail!(
                        "{} rows failed over the {repeats} runs; run again to retry them",
                        r.failed
                    );
                }
                return Ok(());
            }
            let report = toolforge::eval::run::run(&set, &rows, &cfg, &run, &out)?;
            print!(
                "{}",
                toolforge::eval::report::table(&[(report.model.clone(), &report.totals)])
            );
            println!(
                "eval: {} rows ({} run, {} resumed), {} requests, {} cache hits, {} failed; wrote {}",
                report.rows,
                report.accounting["rows_run"],
                report.accounting["rows_resumed"],
                report.accounting["requests"],
                report.accounting["cache_hits"],
                report.accounting["failed_requests"],
                out.display()
            );
            if let Some(ow) = &report.open_world {
                println!(
                    "eval: open world: {} searches over {} tools; per row Recall@5 {:.3}, nDCG@10 {:.3}, MRR {:.3}",
                    ow.searches, ow.catalog_tools, ow.by_row.recall_5, ow.by_row.ndcg_10, ow.by_row.mrr
                );
            }
            println!("eval: page {}", out.join("index.html").display());
            if report.failed > 0 {
                anyhow::bail!(
                    "{} of {} rows failed (the request failed, see {}); they are in no metric — run again to retry them",
                    report.failed,
                    report.rows,
                    out.join("report.md").display()
                );
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Build {
            recipe,
            out,
            store,
            shard,
            merge,
            plan,
            shards,
            quiet,
            no_html,
        } => recipe_path(&recipe).map_err(anyhow::Error::from).and_then(|path| {
            let opts = toolforge::pipeline::BuildOptions {
                out_root: out,
                store,
                progress: !quiet,
                shard,
                merge,
                plan: plan.then(|| shards.unwrap_or(1)),
                no_html,
            };
            toolforge::pipeline::build(&path, &opts)
                .map(|summary| {
                    use std::io::Write as _;
                    let _ = writeln!(std::io::stdout(), "{summary}");
                })
                .map_err(anyhow::Error::from)
        }),
        Command::Serve {
            recipe,
            host,
            port,
            out,
            databases,
            mcp,
            flags,
        } => dataset_dir(&recipe, out.as_deref())
            .and_then(|dir| toolforge::serve::Toolkit::load(&dir, databases.as_deref()))
            .and_then(|toolkit| {
                let run = if mcp {
                    toolforge::serve::mcp::run_stdio
                } else {
                    toolforge::serve::run
                };
                run(toolkit, flags.config((host, port).into()))
            }),
        Command::Eval { command } => eval(command),
        Command::Index(args) => args
            .datasets
            .iter()
            .map(|d| dataset_dir(d, None))
            .collect::<anyhow::Result<Vec<_>>>()
            .and_then(|dirs| args.run(&dirs))
            .map(|r| println!("{r:#}")),
        Command::Retrieval(args) => dataset_dir(&args.dataset, None)
            .and_then(|dir| args.run(&dir))
            .map(|r| println!("{r:#}")),
        Command::Trajectories {
            dir,
            format,
            output,
            faults,
        } => toolforge::emit::trajectories::convert::convert_folder(&dir, &format, output.as_deref(), faults),
        Command::Verify { dir, databases } => {
            let rest = toolforge::emit::read_manifest(&dir).is_ok_and(|m| m["format"] == "rest");
            let result = if rest {
                toolforge::serve::verify_live(&dir, databases.as_deref())
            } else {
                toolforge::emit::reverify(&dir, databases.as_deref())
            };
            result.and_then(|(ok, bad)| {
                println!("verify: {ok} passed, {bad} failed");
                if bad > 0 {
                    Err(anyhow::anyhow!("{bad} rows do not reproduce their gold answer"))
                } else {
                    Ok(())
                }
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
