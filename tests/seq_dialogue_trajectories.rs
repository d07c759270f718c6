//! Issue 45 item 2: SGD and MultiWOZ dialogues as multi-turn dialogue trajectories
//! (`Conversion::dialogues`), judged from the raw corpus files of ../shared/corpora:
//!
//! - every dialogue read is kept or dropped with a reason, and the report counts add up;
//! - a kept dialogue has every turn of the corpus in order, and a system turn's calls come with
//!   a result (SGD: the frame's `service_results`, failed calls included);
//! - a MultiWOZ search made at a turn knows only that turn's belief state (the single-request
//!   rows place a search episode's *final* constraints at its first turn; a dialogue turn must
//!   not know what the user says later);
//! - what `emit::dialogue` writes: one trajectory line and one gold line per kept dialogue, the
//!   gold's calls those of the trajectory (the build test lives in the Python consumer tests).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use toolforge::dataset::dialogue::{Dialogues, Speaker};
use toolforge::pipeline::load_recipe;
use toolforge::seq::{multiwoz, sgd};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn source(recipe: &str) -> toolforge::recipe::ResolvedSource {
    load_recipe(&root().join(format!("recipes/{recipe}.toml"))).unwrap().1
}

fn counts_add_up(d: &Dialogues, stats: &serde_json::Map<String, Value>, attempted: &BTreeMap<String, usize>) {
    for (split, n) in attempted {
        let kept = d.splits.get(split).map_or(0, Vec::len);
        let dropped = d.drops.get(split).map_or(0, Vec::len);
        assert_eq!(kept + dropped, *n, "{split}");
        let c = &stats["dialogue_trajectories"][split];
        assert_eq!(c["kept"], kept, "{split}");
        assert_eq!(c["dropped"], dropped, "{split}");
    }
}

#[test]
fn sgd_dialogues_keep_every_turn_and_every_call_with_its_service_results() {
    let c = sgd::convert(&source("seq-sgd"), Some("dev")).unwrap();
    let d = c.dialogues.as_ref().expect("sgd writes dialogues");
    let attempted: BTreeMap<String, usize> = c.splits.iter().map(|(s, o)| (s.clone(), o.attempted)).collect();
    counts_add_up(d, &c.stats, &attempted);
    let kept = &d.splits["dev"];
    assert!(kept.len() > 1000, "{}", kept.len());
    // The raw dialogue files of dev, by id.
    let mut raw = BTreeMap::new();
    for f in std::fs::read_dir(root().join("../shared/corpora/sgd/dev")).unwrap() {
        let p = f.unwrap().path();
        if p.file_name().unwrap().to_str().unwrap().starts_with("dialogues_") {
            let v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            for dlg in v.as_array().unwrap() {
                raw.insert(format!("dev/{}", dlg["dialogue_id"].as_str().unwrap()), dlg.clone());
            }
        }
    }
    let mut failed_kept = 0;
    for t in kept {
        let r = &raw[&t.id];
        let turns = r["turns"].as_array().unwrap();
        assert_eq!(turns.len(), t.turns.len(), "{}", t.id);
        for (mine, theirs) in t.turns.iter().zip(turns) {
            assert_eq!(mine.text, theirs["utterance"].as_str().unwrap(), "{}", t.id);
            let frames: Vec<&Value> = theirs["frames"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f.get("service_call").is_some())
                .collect();
            assert_eq!(mine.calls.len(), frames.len(), "{}", t.id);
            for (call, frame) in mine.calls.iter().zip(frames) {
                assert_eq!(
                    Value::Object(call.arguments.clone()),
                    frame["service_call"]["parameters"]
                );
                assert_eq!(call.result, frame["service_results"]);
                if frame["actions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|a| a["act"] == "NOTIFY_FAILURE")
                {
                    failed_kept += 1;
                }
            }
        }
    }
    // A failed call stays in the dialogue: the reply that follows reports it.
    assert!(failed_kept > 0);
}

#[test]
fn multiwoz_searches_know_only_the_belief_state_of_their_turn() {
    let c = multiwoz::convert(&source("seq-multiwoz"), Some("dev")).unwrap();
    let d = c.dialogues.as_ref().expect("multiwoz writes dialogues");
    let attempted: BTreeMap<String, usize> = c.splits.iter().map(|(s, o)| (s.clone(), o.attempted)).collect();
    counts_add_up(d, &c.stats, &attempted);
    let raw: Value = serde_json::from_slice(
        &std::fs::read(root().join("../shared/corpora/multiwoz/MultiWOZ_2.1/val.json")).unwrap(),
    )
    .unwrap();
    let kept = &d.splits["dev"];
    assert!(kept.len() > 300, "{}", kept.len());
    let mut finds = 0;
    for t in kept {
        let log = raw[t.id.trim_start_matches("dev/")]["log"].as_array().unwrap();
        assert_eq!(log.len(), t.turns.len(), "{}", t.id);
        for (i, (turn, entry)) in t.turns.iter().zip(log).enumerate() {
            assert_eq!(turn.text, entry["text"].as_str().unwrap());
            assert_eq!(turn.speaker, if i % 2 == 0 { Speaker::User } else { Speaker::System });
            for call in turn.calls.iter().filter(|c| c.name.starts_with("find_")) {
                finds += 1;
                let domain = &call.name["find_".len()..];
                let semi = entry["metadata"][domain]["semi"].as_object().unwrap();
                let said: Vec<String> = semi.values().filter_map(Value::as_str).map(multiwoz::norm).collect();
                // Every argument is a constraint of this turn's state: its value (or the
                // database's spelling of it) is set there.
                for (slot, v) in &call.arguments {
                    let v = multiwoz::norm(v.as_str().unwrap());
                    assert!(
                        said.iter().any(|s| *s == v
                            || s.starts_with(&v)
                            || v.starts_with(s.as_str())
                            || strsim::levenshtein(s, &v) <= 2),
                        "{} log[{i}] {slot}={v} not in the turn's state {semi:?}",
                        t.id
                    );
                }
                assert!(call.result["total"].is_u64() && call.result["results"].is_array());
            }
        }
    }
    assert!(finds > 500, "{finds}");
}
