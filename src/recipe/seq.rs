//! The recipe's `[seq]` table ([`SeqKnobs`]): conversion knobs of `seq` recipes and the endpoint
//! that writes SGD/MultiWOZ requests. Used by `crate::seq`; kept with the recipe model so that the
//! recipe sits below every stage.

use serde::{Deserialize, Serialize};

/// The recipe's `[seq]` table (all optional).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SeqKnobs {
    /// SGD: keep the calls the system reported as failed (a `NOTIFY_FAILURE` system action in
    /// the frame of the `service_call`) in the gold. Default false: they are left out and
    /// counted (`stats.failed_calls_removed`).
    pub keep_failed_calls: bool,
    /// MultiWOZ: keep `find_*` calls the domain databases do not verify. Default false: they are
    /// left out and counted by status (`stats.unverified_calls_removed`).
    pub keep_unverified_calls: bool,
    /// `[seq.llm]`: the endpoint that writes the SGD / MultiWOZ requests (`crate::seq::request`); the
    /// environment is used when absent; no endpoint → the template request stays.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm: Option<crate::llm::LlmConfig>,
}

impl Default for SeqKnobs {
    fn default() -> Self {
        SeqKnobs {
            keep_failed_calls: false,
            keep_unverified_calls: false,
            llm: None,
        }
    }
}

impl SeqKnobs {
    /// The knobs that change the conversion (not the LLM endpoint), for the stage key.
    pub fn conversion_key(&self) -> serde_json::Value {
        serde_json::json!({"keep_failed_calls": self.keep_failed_calls, "keep_unverified_calls": self.keep_unverified_calls})
    }
}
