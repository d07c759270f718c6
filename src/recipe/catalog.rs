//! The recipe's `[catalog]` table ([`CatalogKnobs`]): MCP bundle sampling and the task-synthesis
//! endpoint of `catalog` recipes. Used by `crate::catalog`; kept with the recipe model so that the
//! recipe sits below every stage.

use serde::{Deserialize, Serialize};

/// Default similarity floor of bundle members (TF-IDF cosine to the bundle's first seed).
pub const DEFAULT_MIN_SIMILARITY: f64 = 0.1;

/// The recipe's `[catalog]` table (all optional; MCP bundle sampling).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CatalogKnobs {
    /// RNG seed of the bundle sampler (default 0).
    pub seed: u64,
    /// Number of bundles to draw (default 200).
    pub bundles: usize,
    /// Tools per bundle (default 5).
    pub bundle_size: usize,
    /// Minimum distinct servers per bundle (default 2).
    pub min_servers: usize,
    /// Maximum seed tools per bundle, 1–3 (default 3).
    pub max_seeds: usize,
    /// Similarity floor: minimum TF-IDF cosine of every bundle member to the bundle's first seed
    /// (default [`DEFAULT_MIN_SIMILARITY`]; the rule is documented in `crate::catalog::bundles`).
    pub min_similarity: f64,
    /// Split name of the bundle rows (default `train`).
    pub split: String,
    /// `[catalog.llm]`: the endpoint that writes the bundles' tasks (`crate::catalog::synthesis`); the
    /// environment is used when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm: Option<crate::llm::LlmConfig>,
}

impl Default for CatalogKnobs {
    fn default() -> Self {
        CatalogKnobs {
            seed: 0,
            bundles: 200,
            bundle_size: 5,
            min_servers: 2,
            max_seeds: 3,
            min_similarity: DEFAULT_MIN_SIMILARITY,
            split: "train".into(),
            llm: None,
        }
    }
}
