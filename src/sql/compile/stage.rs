//! The output of one database's compile stage and its store entry.
//!
//! The entry is the JSON of [`Stored`]: the outcome with each distinct toolkit listed once
//! ([`StoredOutcome`]), the REST endpoints and counts. An entry that does not decode is
//! recomputed by the caller.

use serde::{Deserialize, Serialize};

use super::rest::RestCounts;
use crate::corpus::Question;
use crate::dataset::{Drop, Outcome, StoredOutcome};
use crate::recipe::Recipe;
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

    /// Every question of a database dropped with one `reason` (its file is missing or unreadable).
    pub(super) fn drop_all(recipe: &Recipe, qs: &[Question], reason: &str, detail: &str) -> DbStage {
        DbStage {
            outcome: Outcome {
                attempted: qs.len(),
                examples: vec![],
                drops: qs
                    .iter()
                    .map(|q| Drop {
                        id: format!("{}/{}", recipe.name, q.id),
                        group: q.db_id.clone(),
                        reason: reason.into(),
                        detail: detail.into(),
                        question: q.question.clone(),
                        source: Drop::source_text(&q.sql),
                    })
                    .collect(),
            },
            endpoints: vec![],
            rest: RestCounts::default(),
        }
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

    #[test]
    fn a_stage_entry_decodes_without_parsing_toolkits_until_their_specs_are_read() {
        let sel = Toolkit::from(crate::tools::sel::sel_tools(None));
        let small = Toolkit::from(vec![spec("get_alpha_tool"), spec("get_beta_tool")]);
        let example = |id: &str, db: &str, tools: &Toolkit| Example {
            id: id.into(),
            db_id: Some(db.into()),
            tools: tools.clone(),
            ..Example::default()
        };
        let examples = vec![
            example("1", "a", &sel),
            example("2", "a", &small),
            example("3", "b", &sel),
        ];
        // The judge: names and counts read from the specs themselves.
        let mut distinct = std::collections::HashSet::new();
        for e in &examples {
            for t in e.tools.iter() {
                distinct.insert((e.db_id.clone().unwrap(), t.name.clone()));
            }
        }
        let total: usize = examples.iter().map(|e| e.tools.len()).sum();
        let texts: Vec<String> = examples
            .iter()
            .map(|e| serde_json::to_string(&*e.tools).unwrap())
            .collect();
        let stage = DbStage {
            outcome: Outcome {
                examples: examples.clone(),
                drops: Vec::new(),
                attempted: 3,
            },
            ..DbStage::default()
        };
        let (bytes, _) = stage.encode();
        let decoded = DbStage::decode(&bytes).expect("decodes");
        let ex = &decoded.outcome.examples;
        assert!(ex.iter().all(|e| !e.tools.parsed()), "decoding parses no toolkit");
        for ((d, e), text) in ex.iter().zip(&examples).zip(&texts) {
            let names: Vec<&str> = e.tools.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(d.tools.names().collect::<Vec<_>>(), names);
            assert_eq!(
                d.tools.json().as_bytes(),
                text.as_bytes(),
                "json() is the specs' serialisation"
            );
        }
        let refs: Vec<&Example> = ex.iter().collect();
        assert_eq!(super::super::toolkit::tool_counts(&refs), (distinct.len(), total));
        assert!(
            ex.iter().all(|e| !e.tools.parsed()),
            "names, counts and json() parse nothing"
        );
        for (d, e) in ex.iter().zip(&examples) {
            assert_eq!(d.tools.as_slice(), e.tools.as_slice());
        }
        assert!(ex.iter().all(|e| e.tools.parsed()), "reading the specs parses them");
        assert_eq!(
            ex[0].tools.id(),
            ex[2].tools.id(),
            "parsed once for the rows sharing it"
        );
        // A toolkit that is not a list of specs makes the entry not decode (it is recomputed).
        let text = String::from_utf8(bytes).unwrap();
        let bad = text.replacen(r#""name":"get_alpha_tool""#, r#""nom":"get_alpha_tool""#, 1);
        assert_ne!(bad, text);
        assert!(DbStage::decode(bad.as_bytes()).is_none());
    }
}
