//! The output of one database's compile stage and its store entry.
//!
//! The entry is the JSON of [`Stored`]: the outcome with each distinct toolkit listed once
//! ([`StoredOutcome`]), the REST endpoints and counts. An entry that does not decode is
//! recomputed by the caller.

use serde::{Deserialize, Serialize};

use super::rest::RestCounts;
use crate::dataset::{Outcome, StoredOutcome};
use crate::tools::rest::Endpoint;

/// The output of one database's compile stage.
#[derive(Debug, Clone, Default)]
pub(super) struct DbStage {
    pub outcome: Outcome,
    /// REST: the database's endpoints, in first-question order.
    pub endpoints: Vec<Endpoint>,
    /// REST: how the questions were shared out.
    pub rest: RestCounts,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    outcome: StoredOutcome,
    endpoints: Vec<Endpoint>,
    #[serde(default)]
    rest: RestCounts,
}

impl DbStage {
    /// The store entry of this stage, and the stage back (its rows still sharing their toolkits).
    pub fn encode(self) -> (Vec<u8>, DbStage) {
        let stored = Stored {
            outcome: self.outcome.into_stored(),
            endpoints: self.endpoints,
            rest: self.rest,
        };
        let bytes = serde_json::to_vec(&stored).expect("serialise");
        let outcome = Outcome::from_stored(stored.outcome).expect("taken out just now");
        (
            bytes,
            DbStage {
                outcome,
                endpoints: stored.endpoints,
                rest: stored.rest,
            },
        )
    }

    /// The stage of a store entry; `None` when it does not decode.
    pub fn decode(bytes: &[u8]) -> Option<DbStage> {
        let stored: Stored = serde_json::from_slice(bytes).ok()?;
        Some(DbStage {
            outcome: Outcome::from_stored(stored.outcome).ok()?,
            endpoints: stored.endpoints,
            rest: stored.rest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Example;
    use crate::tools::{Toolkit, test_spec as spec};

    #[test]
    fn a_stage_entry_lists_a_shared_toolkit_once_and_decodes_to_the_same_rows() {
        let shared = Toolkit::from(vec![spec("get_alpha_tool")]);
        let example = |id: &str, tools: &Toolkit| Example {
            id: id.into(),
            tools: tools.clone(),
            ..Example::default()
        };
        let other = Toolkit::from(vec![spec("get_beta_tool")]);
        let stage = DbStage {
            outcome: Outcome {
                examples: vec![example("1", &shared), example("2", &other), example("3", &shared)],
                drops: Vec::new(),
                attempted: 3,
            },
            ..DbStage::default()
        };
        let before = stage.outcome.clone();
        let (bytes, back) = stage.encode();
        assert_eq!(back.outcome, before);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert_eq!(text.matches(r#""name":"get_alpha_tool""#).count(), 1, "{text}");
        let decoded = DbStage::decode(&bytes).expect("decodes");
        assert_eq!(decoded.outcome, before);
        let ex = &decoded.outcome.examples;
        assert_eq!(
            ex[0].tools.id(),
            ex[2].tools.id(),
            "decoded rows share the toolkit again"
        );
        assert!(DbStage::decode(br#"{"outcome": {"outcome": {"examples": [], "drops": [], "attempted": 0}, "toolkits": [], "toolkit_of": [0]}, "endpoints": []}"#).is_none());
    }
}
