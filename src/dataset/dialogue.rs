//! Multi-turn dialogue trajectories (issue 45, item 2): the SGD and MultiWOZ dialogues as the seq
//! stage grounds them, turn by turn, for `emit::dialogue` to write as chat trajectories.
//!
//! A [`Dialogue`] is every user and system turn of the corpus dialogue in order; a system turn
//! carries the service calls the system made at that turn ([`GroundedCall`]: canonical name and
//! arguments, and the result the call returned — SGD's `service_results`, a MultiWOZ database
//! search or booking), then the system's utterance. A dialogue any of whose calls cannot be
//! grounded is never a [`Dialogue`]: it is a [`Drop`] with the reason named by the converter
//! (`seq::sgd::trajectory`, `seq::multiwoz::trajectory`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Drop;

/// The dialogues of a build, per split.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dialogues {
    /// Per split, the grounded dialogues in corpus order.
    pub splits: BTreeMap<String, Vec<Dialogue>>,
    /// Per split, the dialogues dropped (reason code, detail), in corpus order.
    pub drops: BTreeMap<String, Vec<Drop>>,
    /// The rules of the conversion, in words (the card and the report state them).
    pub rules: Vec<String>,
}

/// One grounded dialogue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dialogue {
    /// `<split>/<corpus dialogue id>` (the build prefixes the dataset name).
    pub id: String,
    /// The system prompt.
    pub system: String,
    /// The tools offered (names in the dataset catalog), in catalog order.
    pub tools: Vec<String>,
    /// Every turn of the corpus dialogue, in order.
    pub turns: Vec<Turn>,
}

/// Who speaks a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Speaker {
    User,
    System,
}

/// One turn: its utterance and, at a system turn, the calls made before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    pub speaker: Speaker,
    /// The utterance as the corpus has it.
    pub text: String,
    /// The calls the system made at this turn, in order (empty for user turns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<GroundedCall>,
}

/// One call with its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundedCall {
    /// Tool name (in the dataset catalog).
    pub name: String,
    /// Canonical arguments.
    pub arguments: Map<String, Value>,
    /// What the call returned (a tool message shows its JSON text).
    pub result: Value,
}

impl Dialogues {
    /// Per split: `{attempted, kept, dropped, dropped_by_reason}` (the report's
    /// `stats.dialogue_trajectories`).
    pub fn counts(&self) -> Value {
        let mut out = Map::new();
        let splits: std::collections::BTreeSet<&String> = self.splits.keys().chain(self.drops.keys()).collect();
        for split in splits {
            let kept = self.splits.get(split).map_or(0, Vec::len);
            let drops = self.drops.get(split).map(Vec::as_slice).unwrap_or_default();
            let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
            for d in drops {
                *by_reason.entry(d.reason.as_str()).or_insert(0) += 1;
            }
            out.insert(
                split.clone(),
                serde_json::json!({"attempted": kept + drops.len(), "kept": kept, "dropped": drops.len(), "dropped_by_reason": by_reason}),
            );
        }
        Value::Object(out)
    }
}
