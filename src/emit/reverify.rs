//! Re-verification of a built SLOT/SEL dataset from its files (`toolforge verify`): the rows read
//! back from Parquet ([`super::rows::read_rows`]) are re-executed through the executor and
//! compared with their `gold_answer`.

use std::path::Path;

use anyhow::Result;

use super::manifest::database_root;
use super::rows::read_rows;
use crate::tools::executor::Executor;

/// Reads `dir/data/*.parquet` back and re-executes each row's calls through the executor (SLOT,
/// SEL) and compares with its `gold_answer`; rows without a gold answer are skipped. Returns
/// (passed, failed). REST datasets are verified through the live server instead
/// ([`crate::serve::verify_live`]).
pub fn reverify(dir: &Path, databases: Option<&Path>) -> Result<(usize, usize)> {
    let executor = Executor::new(database_root(dir, databases)?);
    let (mut ok, mut bad) = (0, 0);
    for row in read_rows(dir)? {
        let Some(expected) = &row.gold_answer else { continue };
        if row.variant_of.is_some() {
            continue; // variant rows run only through their migration (tests/variants.rs)
        }
        let (setup, calls) = crate::tools::setup_and_calls(
            row.initialization_step.as_ref(),
            &row.additional_setup_steps,
            &row.output,
        );
        match executor.run_with_setup(&setup, calls) {
            Ok(got) => match crate::verify::compare(expected, &got, row.ordered, row.ties.as_deref()) {
                Ok(()) => ok += 1,
                Err(d) => {
                    eprintln!("{}: answer differs from gold_answer: {d}", row.id);
                    bad += 1;
                }
            },
            Err(e) => {
                eprintln!("{}: {e}", row.id);
                bad += 1;
            }
        }
    }
    Ok((ok, bad))
}
