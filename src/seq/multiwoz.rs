//! MultiWOZ (`multiwoz` source) → API-BLEND sequences. (Converter under construction.)

use std::path::PathBuf;

use super::Conversion;
use crate::corpus::CorpusError;
use crate::recipe::ResolvedSource;

/// Every file the conversion reads.
pub fn inputs(source: &ResolvedSource) -> Vec<PathBuf> {
    vec![source.questions.clone()]
}

/// Converts the source (only `split` when given).
pub fn convert(source: &ResolvedSource, split: Option<&str>) -> Result<Conversion, CorpusError> {
    let _ = split;
    Err(CorpusError::Malformed {
        path: source.root.clone(),
        message: "this converter is not built yet".into(),
    })
}
