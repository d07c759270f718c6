//! The `toolforge` command line.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// toolforge: compile annotated corpora (text-to-SQL, NLU, dialogue) into verified
/// tool-calling datasets, and serve their tools live.
#[derive(Parser)]
#[command(
    version,
    about,
    long_about = None,
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
        /// Store directory (default: the recipe's `store`, else `<project>/out/.store`).
        #[arg(long)]
        store: Option<PathBuf>,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
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
        /// Per-query time limit in milliseconds.
        #[arg(long, default_value_t = 5000)]
        timeout_ms: u64,
        /// Most rows in one response.
        #[arg(long, default_value_t = 100_000)]
        max_rows: usize,
        /// Most live SLOT/SEL sessions (least recently used ends first).
        #[arg(long, default_value_t = 1000)]
        max_sessions: usize,
        /// Share of tool/endpoint requests (0–1) answered with a random injected fault
        /// (a request can also ask for one with header `X-Toolforge-Fault: <kind>`).
        #[arg(long, default_value_t = 0.0)]
        fault_rate: f64,
        /// Seed of the random fault choice.
        #[arg(long, default_value_t = 0)]
        fault_seed: u64,
        /// Serve the tools over MCP on stdin/stdout instead of HTTP (the HTTP server always has
        /// MCP streamable HTTP at `/mcp`).
        #[arg(long)]
        mcp: bool,
    },
    /// Write a built dataset's trajectories (`<dir>/trajectories/*.jsonl`, OpenAI chat format) in
    /// another format: `sharegpt` (ShareGPT / Hermes function-calling style) or `openai`.
    Trajectories {
        /// A built dataset directory, e.g. `out/slot-spider`.
        dir: PathBuf,
        /// Output format.
        #[arg(long, value_parser = ["openai", "sharegpt"], default_value = "sharegpt")]
        format: String,
        /// Output file (default: standard output).
        #[arg(long, short)]
        output: Option<PathBuf>,
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
}

/// A recipe argument as a file: see [`toolforge::recipe::resolve_recipe`] (names resolve against
/// the project root from any directory; unknown names list the available recipes).
fn recipe_path(r: &str) -> Result<PathBuf, toolforge::recipe::RecipeError> {
    toolforge::recipe::resolve_recipe(r)
}

/// A built dataset directory: `r` itself if it holds a MANIFEST.json, else `<out>/<recipe name>`.
fn dataset_dir(r: &str, out: Option<&std::path::Path>) -> anyhow::Result<PathBuf> {
    let p = PathBuf::from(r);
    if p.join("MANIFEST.json").is_file() {
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

/// Converts every trajectory file of `dir` (clean and faulted, in name order) to `format`.
fn write_trajectories(dir: &std::path::Path, format: &str, output: Option<&std::path::Path>) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::Write as _;
    let tdir = dir.join("trajectories");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&tdir)
        .with_context(|| {
            format!(
                "{}: no trajectories (build an executable dataset first)",
                tdir.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut out: Vec<u8> = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
        for (i, line) in text.lines().enumerate() {
            let t: serde_json::Value =
                serde_json::from_str(line).with_context(|| format!("{} line {}: not JSON", f.display(), i + 1))?;
            let row = if format == "sharegpt" {
                toolforge::emit::trajectories::to_sharegpt(&t)
            } else {
                t
            };
            serde_json::to_writer(&mut out, &row)?;
            out.push(b'\n');
        }
    }
    match output {
        Some(p) => {
            let tmp = p.with_extension("tmp");
            std::fs::write(&tmp, &out).with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, p).with_context(|| format!("renaming to {}", p.display()))?;
        }
        None => {
            let _ = std::io::stdout().write_all(&out);
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Build {
            recipe,
            out,
            store,
            quiet,
        } => recipe_path(&recipe).map_err(anyhow::Error::from).and_then(|path| {
            toolforge::pipeline::build_and_emit(&path, out.as_deref(), store.as_deref(), !quiet)
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
            timeout_ms,
            max_rows,
            max_sessions,
            fault_rate,
            fault_seed,
            mcp,
        } => dataset_dir(&recipe, out.as_deref())
            .and_then(|dir| toolforge::serve::Toolkit::load(&dir, databases.as_deref()))
            .and_then(|toolkit| {
                let run = if mcp {
                    toolforge::serve::mcp::run_stdio
                } else {
                    toolforge::serve::run
                };
                run(
                    toolkit,
                    toolforge::serve::ServeConfig {
                        addr: (host, port).into(),
                        timeout: std::time::Duration::from_millis(timeout_ms),
                        max_rows,
                        max_sessions,
                        fault_rate,
                        fault_seed,
                    },
                )
            }),
        Command::Trajectories { dir, format, output } => write_trajectories(&dir, &format, output.as_deref()),
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
