//! Real token counts for the card when the mix names a Hugging Face `tokenizer.json`
//! (`tokenizer = "…"`): the `tokenizers` crate (the library behind `transformers`' fast
//! tokenizers; default features off, `fancy-regex` instead of the C Oniguruma library), counting
//! each row's JSON line — the text the chars/4 estimate divides — without special tokens and
//! without a chat template (whose markup adds a few tokens per message).

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::MixError;

/// A loaded tokenizer.
pub struct Counter {
    path: PathBuf,
    tokenizer: tokenizers::Tokenizer,
}

impl Counter {
    /// Reads `path`. Errors: missing or not a `tokenizer.json` (the file named).
    pub fn load(path: &Path) -> Result<Counter, MixError> {
        let tokenizer = tokenizers::Tokenizer::from_file(path).map_err(|e| MixError::Io {
            path: path.into(),
            message: format!("not a Hugging Face tokenizer.json: {e}"),
        })?;
        Ok(Counter {
            path: path.into(),
            tokenizer,
        })
    }

    /// The token count of every line, in order.
    pub fn count_all(&self, lines: &[&[u8]]) -> Result<Vec<u64>, MixError> {
        lines
            .par_iter()
            .map(|l| {
                let text = String::from_utf8_lossy(l);
                self.tokenizer
                    .encode_fast(text.as_ref(), false)
                    .map(|e| e.len() as u64)
                    .map_err(|e| MixError::Io {
                        path: self.path.clone(),
                        message: format!("tokenizing: {e}"),
                    })
            })
            .collect()
    }
}
