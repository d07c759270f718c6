//! The recipe's `[variants]` section ([`VariantsConfig`]): which variant operators run and with
//! what knobs. The operators themselves are in `crate::variants`; this is only the validated
//! configuration, so that the recipe model sits below every stage.

use serde::{Deserialize, Serialize};

/// The six DynamicToolBench drift operators (`crate::variants::drift`, one file each).
pub const DRIFT_OPERATORS: [&str; 6] = [
    "endpoint_evolution",
    "parameter_rename",
    "type_drift",
    "required_swap",
    "default_flip",
    "nested_object",
];

/// The `[variants]` section of a recipe. Each present sub-table enables one operator.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantsConfig {
    /// Seed of every operator's random stream (default 0).
    #[serde(default)]
    pub seed: u64,
    /// `[variants.perturb]`: deterministic request perturbations.
    #[serde(default)]
    pub perturb: Option<PerturbConfig>,
    /// `[variants.drift]`: schema drift with migrated gold.
    #[serde(default)]
    pub drift: Option<DriftConfig>,
    /// `[variants.distractors]`: toolkit expansion with related tools.
    #[serde(default)]
    pub distractors: Option<DistractorsConfig>,
    /// `obfuscate = true`: `FUNC_i` / `ARG_i` names.
    #[serde(default)]
    pub obfuscate: bool,
    /// `[variants.shortlist]`: toolkits of a fraction of the domain universe.
    #[serde(default)]
    pub shortlist: Option<ShortlistConfig>,
    /// `[variants.paraphrase]`: LLM rephrasings of the request (`crate::variants::paraphrase`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paraphrase: Option<ParaphraseConfig>,
    /// `[variants.llm]`: the OpenAI-compatible endpoint the LLM variants use
    /// ([`crate::llm::LlmConfig`]; environment fallbacks when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<crate::llm::LlmConfig>,
}

/// `[variants.paraphrase]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParaphraseConfig {
    /// Candidates requested per example (default 3).
    #[serde(default = "default_paraphrase_n")]
    pub n: usize,
    /// Paraphrase only the first `max_examples` examples (group order, then example order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_examples: Option<usize>,
}

fn default_paraphrase_n() -> usize {
    3
}

/// Perturbation kinds: `case`, `punctuation`, `narrative`.
pub const PERTURBATIONS: [&str; 3] = ["case", "punctuation", "narrative"];

/// `[variants.perturb]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerturbConfig {
    /// Which perturbations to make, one row each (default all of [`PERTURBATIONS`]).
    #[serde(default = "default_perturbations")]
    pub kinds: Vec<String>,
}

fn default_perturbations() -> Vec<String> {
    PERTURBATIONS.iter().map(|s| s.to_string()).collect()
}

/// `[variants.drift]`: DynamicToolBench's seeded stochastic operator mix: REST, drawn per
/// endpoint (one random stream per endpoint: recipe seed, `drift`, database, name); SLOT/SEL,
/// per instance (one stream per instance and tool: recipe seed, `drift`, row id, tool name).
///
/// ```toml
/// [variants.drift]
/// operators = ["parameter_rename", "type_drift"]   # which operators may apply (default: all six)
/// rate = 0.5                                       # probability of each applicable operator
/// weights = { type_drift = 0.9, endpoint_evolution = 0.1 }   # per-operator probability, else `rate`
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriftConfig {
    /// Operators to draw from (default all of [`DRIFT_OPERATORS`]).
    #[serde(default = "default_operators")]
    pub operators: Vec<String>,
    /// Probability that an applicable operator is applied to a tool (default 0.5); a tool with
    /// any applicable operator always gets at least one.
    #[serde(default = "default_rate")]
    pub rate: f64,
    /// Per-operator probability, overriding `rate` for the operators named (each in [0, 1]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub weights: std::collections::BTreeMap<String, f64>,
}

impl DriftConfig {
    /// The probability that the applicable operator `op` is applied to a tool.
    pub fn probability(&self, op: &str) -> f64 {
        self.weights.get(op).copied().unwrap_or(self.rate)
    }
}

fn default_operators() -> Vec<String> {
    DRIFT_OPERATORS.iter().map(|s| s.to_string()).collect()
}

fn default_rate() -> f64 {
    0.5
}

/// `[variants.distractors]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistractorsConfig {
    /// Tools added per instance (default 5).
    #[serde(default = "default_k")]
    pub k: usize,
    /// Candidates whose signature similarity to a gold tool is at least this are dropped
    /// (default 0.8; `crate::variants::distractors::signature_similarity`).
    #[serde(default = "default_max_sim")]
    pub max_signature_similarity: f64,
    /// Candidates less related than this to the gold tools are never drawn: BM25 score over
    /// the best gold tool's own score in the same index (`crate::variants::distractors`);
    /// default [`DEFAULT_MIN_RELATEDNESS`], at least 0.
    #[serde(default = "default_min_relatedness")]
    pub min_relatedness: f64,
}

/// The default `variants.distractors.min_relatedness`.
pub const DEFAULT_MIN_RELATEDNESS: f64 = 0.3;

fn default_min_relatedness() -> f64 {
    DEFAULT_MIN_RELATEDNESS
}

fn default_k() -> usize {
    5
}

fn default_max_sim() -> f64 {
    0.8
}

/// `[variants.shortlist]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShortlistConfig {
    /// Fractions of the domain universe (default 0.10, 0.25, 0.50, 0.75).
    #[serde(default = "default_fractions")]
    pub fractions: Vec<f64>,
}

fn default_fractions() -> Vec<f64> {
    vec![0.10, 0.25, 0.50, 0.75]
}

impl VariantsConfig {
    /// Checks the values with a fixed set; the error names the key and the allowed values.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(l) = &self.llm {
            l.validate()?;
        }
        if let Some(p) = &self.perturb {
            for k in &p.kinds {
                if !PERTURBATIONS.contains(&k.as_str()) {
                    return Err(format!(
                        "key `variants.perturb.kinds`: unknown value {k:?}, expected one of {PERTURBATIONS:?}"
                    ));
                }
            }
        }
        if let Some(d) = &self.drift {
            for o in &d.operators {
                if !DRIFT_OPERATORS.contains(&o.as_str()) {
                    return Err(format!(
                        "key `variants.drift.operators`: unknown value {o:?}, expected one of {:?}",
                        DRIFT_OPERATORS
                    ));
                }
            }
            if !(0.0..=1.0).contains(&d.rate) {
                return Err(format!("key `variants.drift.rate`: {} is not in [0, 1]", d.rate));
            }
            for (o, w) in &d.weights {
                if !DRIFT_OPERATORS.contains(&o.as_str()) {
                    return Err(format!(
                        "key `variants.drift.weights`: unknown operator {o:?}, expected one of {DRIFT_OPERATORS:?}"
                    ));
                }
                if !(0.0..=1.0).contains(w) {
                    return Err(format!("key `variants.drift.weights.{o}`: {w} is not in [0, 1]"));
                }
            }
        }
        if let Some(s) = &self.shortlist {
            if let Some(f) = s.fractions.iter().find(|f| !(**f > 0.0 && **f < 1.0)) {
                return Err(format!("key `variants.shortlist.fractions`: {f} is not in (0, 1)"));
            }
        }
        if let Some(d) = &self.distractors {
            if !(0.0..=1.0).contains(&d.max_signature_similarity) {
                return Err(format!(
                    "key `variants.distractors.max_signature_similarity`: {} is not in [0, 1]",
                    d.max_signature_similarity
                ));
            }
            if !(d.min_relatedness >= 0.0 && d.min_relatedness.is_finite()) {
                return Err(format!(
                    "key `variants.distractors.min_relatedness`: {} is not a number at least 0",
                    d.min_relatedness
                ));
            }
        }
        Ok(())
    }
}
