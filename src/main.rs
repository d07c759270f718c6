//! The `toolforge` command line.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// toolforge: compile text-to-SQL corpora into verified tool-calling datasets.
#[derive(Parser)]
#[command(version, about, long_about = None)]
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
    /// Re-execute every row of a built dataset's Parquet file through the executor and compare
    /// with its `gold_answer`; exit 1 on any mismatch.
    Verify {
        /// A built dataset directory, e.g. `out/slot-bird`.
        dir: PathBuf,
        /// Directory holding `<db>/<db>.sqlite` (default: the recipe's source, from MANIFEST.json).
        #[arg(long)]
        databases: Option<PathBuf>,
    },
}

fn recipe_path(r: &str) -> PathBuf {
    let p = PathBuf::from(r);
    if p.exists() || r.ends_with(".toml") {
        p
    } else {
        PathBuf::from("recipes").join(format!("{r}.toml"))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Build {
            recipe,
            out,
            store,
            quiet,
        } => {
            let path = recipe_path(&recipe);
            toolforge::emit::build_and_emit(&path, out.as_deref(), store.as_deref(), !quiet)
                .map(|summary| println!("{summary}"))
                .map_err(anyhow::Error::from)
        }
        Command::Verify { dir, databases } => {
            toolforge::emit::reverify(&dir, databases.as_deref()).and_then(|(ok, bad)| {
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
