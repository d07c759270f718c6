//! The LLM endpoint's configuration: [`LlmConfig`] (a recipe's `[variants.llm]` or
//! `[catalog.llm]` table; keys and defaults in the [`crate::llm`] module doc), checked by
//! [`LlmConfig::validate`], and [`resolve`]d against the environment fallbacks into a
//! [`Resolved`] endpoint or the reason it is [`Unavailable`].

use serde::{Deserialize, Serialize};

/// `[variants.llm]`: the endpoint and sampling parameters (module docs for defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    /// OpenAI-compatible base URL, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Model name sent with each request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Name of the environment variable holding the API key (default `OPENAI_API_KEY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Sampling temperature.
    #[serde(default = "default_temperature")]
    pub temperature: f64,
    /// Base seed; request `i` of an item uses `seed + i`.
    #[serde(default)]
    pub seed: u64,
    /// Completion length cap.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// Requests in flight at most.
    #[serde(default = "default_concurrency")]
    pub max_concurrency: usize,
    /// Request starts per second at most (none: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_second: Option<f64>,
    /// Attempts per request (first try included).
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    /// First retry delay in milliseconds, doubled per retry (capped at 30 s).
    #[serde(default = "default_backoff")]
    pub initial_backoff_ms: u64,
    /// Time limit per attempt in seconds.
    #[serde(default = "default_timeout")]
    pub timeout_secs: f64,
    /// Send the requests that miss the store as one batch through the provider's Batch API
    /// (OpenAI's shape: a JSONL file of requests, poll, fetch the results) instead of one live
    /// request each ([`crate::llm::batch`]). Env fallback `TOOLFORGE_LLM_BATCH=1`.
    #[serde(default)]
    pub batch: bool,
    /// Seconds between two polls of a submitted batch.
    #[serde(default = "default_batch_poll")]
    pub batch_poll_secs: f64,
    /// Seconds a build waits for a batch before giving up on its unanswered requests (they are
    /// reported as failed, not cached; the next build resumes the same batch).
    #[serde(default = "default_batch_wait")]
    pub batch_max_wait_secs: f64,
}

fn default_temperature() -> f64 {
    0.7
}
fn default_max_tokens() -> u32 {
    96
}
fn default_concurrency() -> usize {
    4
}
fn default_attempts() -> u32 {
    5
}
fn default_backoff() -> u64 {
    500
}
fn default_timeout() -> f64 {
    120.0
}
fn default_batch_poll() -> f64 {
    30.0
}
fn default_batch_wait() -> f64 {
    // The Batch API's completion window is 24 h; one more hour for finalising.
    25.0 * 3600.0
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            base_url: None,
            model: None,
            api_key_env: None,
            temperature: default_temperature(),
            seed: 0,
            max_tokens: default_max_tokens(),
            max_concurrency: default_concurrency(),
            requests_per_second: None,
            max_attempts: default_attempts(),
            initial_backoff_ms: default_backoff(),
            timeout_secs: default_timeout(),
            batch: false,
            batch_poll_secs: default_batch_poll(),
            batch_max_wait_secs: default_batch_wait(),
        }
    }
}

impl LlmConfig {
    /// Checks value ranges; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=2.0).contains(&self.temperature) {
            return Err(format!(
                "key `variants.llm.temperature`: {} is not in [0, 2]",
                self.temperature
            ));
        }
        if self.max_concurrency == 0 {
            return Err("key `variants.llm.max_concurrency`: must be at least 1".into());
        }
        if self.max_attempts == 0 {
            return Err("key `variants.llm.max_attempts`: must be at least 1".into());
        }
        if let Some(r) = self.requests_per_second {
            if !(r > 0.0 && r.is_finite()) {
                return Err(format!("key `variants.llm.requests_per_second`: {r} is not positive"));
            }
        }
        if !(self.timeout_secs > 0.0 && self.timeout_secs.is_finite()) {
            return Err(format!(
                "key `variants.llm.timeout_secs`: {} is not positive",
                self.timeout_secs
            ));
        }
        for (key, v) in [
            ("batch_poll_secs", self.batch_poll_secs),
            ("batch_max_wait_secs", self.batch_max_wait_secs),
        ] {
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("key `variants.llm.{key}`: {v} is not positive"));
            }
        }
        Ok(())
    }
}

/// Why the LLM cannot be used: no endpoint (skip quietly, one summary line) or a configuration
/// error (one error line; the build goes on without LLM variants).
#[derive(Debug, Clone, PartialEq)]
pub enum Unavailable {
    /// No base URL in the recipe or `OPENAI_BASE_URL`.
    NoEndpoint,
    /// Endpoint set but unusable (no model, bad URL).
    Misconfigured(String),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::NoEndpoint => write!(
                f,
                "skipped: no endpoint configured (set OPENAI_BASE_URL or [variants.llm] base_url)"
            ),
            Unavailable::Misconfigured(m) => write!(f, "error: {m}"),
        }
    }
}

/// The configuration with environment fallbacks applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// Base URL (trailing `/` removed).
    pub base_url: String,
    /// Model.
    pub model: String,
    /// API key (empty when the variable is unset; local servers ignore it).
    pub api_key: String,
    /// The recipe table.
    pub cfg: LlmConfig,
}

/// Applies the environment fallbacks (module docs).
pub fn resolve(cfg: &LlmConfig) -> Result<Resolved, Unavailable> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let base_url = cfg
        .base_url
        .clone()
        .filter(|v| !v.trim().is_empty())
        .or_else(|| env("OPENAI_BASE_URL"))
        .ok_or(Unavailable::NoEndpoint)?;
    let base_url = base_url.trim().trim_end_matches('/').to_string();
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(Unavailable::Misconfigured(format!(
            "base URL {base_url:?} is not an http:// or https:// URL"
        )));
    }
    let model = cfg
        .model
        .clone()
        .or_else(|| env("TOOLFORGE_LLM_MODEL"))
        .ok_or_else(|| {
            Unavailable::Misconfigured(format!(
                "endpoint {base_url} has no model (set TOOLFORGE_LLM_MODEL or [variants.llm] model)"
            ))
        })?;
    let key_var = cfg.api_key_env.clone().unwrap_or_else(|| "OPENAI_API_KEY".into());
    let api_key = std::env::var(&key_var).unwrap_or_default();
    let mut cfg = cfg.clone();
    if env("TOOLFORGE_LLM_BATCH").is_some_and(|v| v != "0") {
        cfg.batch = true;
    }
    Ok(Resolved {
        base_url,
        model,
        api_key,
        cfg,
    })
}

/// The request rate (starts per second) one process may use: the recipe's
/// `requests_per_second` for a single build, `requests_per_second / N` for shard I/N (the
/// provider's limit is shared by the N shards running at once; issue 34), none when unlimited.
pub fn shard_rate(requests_per_second: Option<f64>, scope: crate::store::Scope) -> Option<f64> {
    match scope {
        crate::store::Scope::Shard { count, .. } if count > 1 => requests_per_second.map(|r| r / count as f64),
        _ => requests_per_second,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Scope;

    #[test]
    fn shard_rate_divides_the_limit_among_the_shards() {
        assert_eq!(shard_rate(Some(20.0), Scope::All), Some(20.0));
        assert_eq!(shard_rate(Some(20.0), Scope::Shard { index: 1, count: 4 }), Some(5.0));
        assert_eq!(shard_rate(Some(20.0), Scope::Shard { index: 0, count: 1 }), Some(20.0));
        assert_eq!(shard_rate(None, Scope::Shard { index: 0, count: 4 }), None);
    }

    #[test]
    fn batch_keys_are_checked_naming_the_key() {
        let ok = LlmConfig {
            batch: true,
            ..LlmConfig::default()
        };
        assert!(ok.validate().is_ok());
        for (poll, wait, key) in [
            (0.0, 60.0, "batch_poll_secs"),
            (f64::NAN, 60.0, "batch_poll_secs"),
            (1.0, -1.0, "batch_max_wait_secs"),
        ] {
            let bad = LlmConfig {
                batch_poll_secs: poll,
                batch_max_wait_secs: wait,
                ..ok.clone()
            };
            let e = bad.validate().unwrap_err();
            assert!(
                e.contains(&format!("`variants.llm.{key}`")) && e.contains("not positive"),
                "{e}"
            );
        }
        // The recipe table: unknown keys are refused, `batch` parses.
        let parsed: LlmConfig = toml::from_str("batch = true\nbatch_poll_secs = 2.5").unwrap();
        assert!(parsed.batch && parsed.batch_poll_secs == 2.5);
        assert!(toml::from_str::<LlmConfig>("batch_pol_secs = 2").is_err());
    }
}
