//! SeqATIS / SeqSNIPS / SeqTopV2 conversion rules pinned on real records of ../shared/corpora,
//! plus hand-made fixtures for malformed input. Conversions of the real corpora are computed
//! once per test binary.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::{Value, json};
use toolforge::dataset::Example;
use toolforge::pipeline::load_recipe;
use toolforge::recipe::ResolvedSource;
use toolforge::seq::{Conversion, nlu, topv2};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn source(recipe: &str) -> ResolvedSource {
    load_recipe(&root().join(format!("recipes/{recipe}.toml"))).unwrap().1
}

fn atis() -> &'static Conversion {
    static C: OnceLock<Conversion> = OnceLock::new();
    C.get_or_init(|| nlu::convert(&source("seq-atis"), None).unwrap())
}

fn snips() -> &'static Conversion {
    static C: OnceLock<Conversion> = OnceLock::new();
    C.get_or_init(|| nlu::convert(&source("seq-snips"), None).unwrap())
}

fn top() -> &'static Conversion {
    static C: OnceLock<Conversion> = OnceLock::new();
    C.get_or_init(|| {
        let start = std::time::Instant::now();
        let c = topv2::convert(&source("seq-topv2"), None).unwrap();
        let secs = start.elapsed().as_secs_f64();
        eprintln!("TOPv2 conversion of 180,542 rows: {secs:.2} s");
        assert!(secs < 30.0, "TOPv2 conversion took {secs:.1} s");
        c
    })
}

fn example<'a>(c: &'a Conversion, id: &str) -> &'a Example {
    let split = id.split('/').next().unwrap();
    c.splits[split]
        .examples
        .iter()
        .find(|e| e.id == id)
        .unwrap_or_else(|| panic!("no example {id}"))
}

/// `(tool, label, arguments)` of each call.
fn calls(e: &Example) -> Vec<(String, String, Value)> {
    e.output
        .iter()
        .map(|c| (c.name.clone(), c.label.clone(), Value::Object(c.arguments.clone())))
        .collect()
}

fn call(tool: &str, label: &str, args: Value) -> (String, String, Value) {
    (tool.into(), label.into(), args)
}

#[test]
fn mixatis_slots_on_both_sides_of_the_conjunction() {
    // mixatis_clean/dev.txt record 0: the clause boundary is "and also", not the "and" inside
    // "between 10 am and 2 pm" (three connector candidates; ATIS dev confirms one split).
    let e = example(atis(), "dev/0");
    assert_eq!(
        e.input,
        "how many passengers can a boeing 737 hold and also flights from pittsburgh to baltimore between 10 am and 2 pm"
    );
    assert_eq!(
        calls(e),
        vec![
            call("atis_capacity", "atis_capacity_1", json!({"aircraft_code": "737"})),
            call(
                "atis_flight",
                "atis_flight_1",
                json!({"fromloc_city_name": "pittsburgh", "toloc_city_name": "baltimore",
                       "depart_time_start_time": "10 am", "depart_time_end_time": "2 pm"})
            ),
        ]
    );
    let meta = e.meta.as_ref().unwrap();
    assert_eq!(meta["connectors"], json!(["and also"]));
    assert_eq!(meta["split_method"], "reference_match");
    // The toolkit is every ATIS intent (issue 30), not the two gold tools.
    assert!(
        e.tools.len() > 2
            && ["atis_capacity", "atis_flight"]
                .iter()
                .all(|g| e.tools.iter().any(|t| t.name == *g))
    );
}

#[test]
fn mixatis_clause_may_start_with_also() {
    // mixatis_clean/train line 4132: ATIS has "also give me a list of flights between oakland
    // and boston" (atis_flight), so the connector is "and", not "and also".
    let e = example(atis(), "train/4131");
    assert_eq!(e.meta.as_ref().unwrap()["connectors"], json!(["and"]));
    assert_eq!(e.output[0].arguments["restriction_code"], "ap80");
    assert_eq!(e.output[1].arguments["fromloc_city_name"], "oakland");
}

#[test]
fn mixatis_three_intents_from_train_without_reference_ambiguity() {
    // mixatis_clean/train line 1: "define airline ua , names of airports and also show me …"
    let e = example(atis(), "train/0");
    assert_eq!(
        e.output.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        vec!["atis_abbreviation", "atis_airport", "atis_city"]
    );
    assert_eq!(e.output[0].arguments["airline_code"], "ua");
    assert!(e.output[1].arguments.is_empty());
    // "both by nationair and canadian airlines international": a repeated slot is an array.
    assert_eq!(
        e.output[2].arguments["airline_name"],
        json!(["nationair", "canadian airlines international"])
    );
}

#[test]
fn snips_train_tags_are_rebuilt_from_snips_train() {
    // mixsnips_clean/train line 1 has no seq.out; snips/train.txt holds both clauses.
    let e = example(snips(), "train/0");
    assert_eq!(e.input, "play isham jones and swine not deserves four points");
    assert_eq!(
        calls(e),
        vec![
            call("play_music", "play_music_1", json!({"artist": "isham jones"})),
            call(
                "rate_book",
                "rate_book_1",
                json!({"object_name": "swine not", "rating_value": "four", "rating_unit": "points"})
            ),
        ]
    );
    assert_eq!(
        e.meta.as_ref().unwrap()["tags_source"],
        "reconstructed from snips train"
    );
    // The method, run on dev/test while ignoring their tags, reproduces the gold tags.
    let rec = &snips().stats["tag_reconstruction"];
    for split in ["dev", "test"] {
        let rate = rec[split]["exact_match_rate"].as_f64().unwrap();
        assert!(rate >= 0.99, "{split}: {rate}");
    }
    let train = &snips().splits["train"];
    assert!(train.examples.len() as f64 >= 0.99 * train.attempted as f64);
    assert!(
        train
            .drops
            .iter()
            .all(|d| d.reason == "ambiguous_tags" || d.reason == "no_tags")
    );
}

#[test]
fn topv2_nested_intent_is_an_earlier_call() {
    // navigation_eval.tsv line 107 is navigation_train.tsv line 2069 (lower-cased): the eval row
    // goes (`seen_in_earlier_split`), the train row keeps the calls.
    let d = top().splits["eval"]
        .drops
        .iter()
        .find(|d| d.id == "eval/navigation/105")
        .unwrap();
    assert_eq!(d.reason, "seen_in_earlier_split");
    assert!(d.detail.contains("train/navigation/2067"), "{}", d.detail);
    let e = example(top(), "train/navigation/2067");
    assert_eq!(e.input, "how long will it take me to get home from here");
    assert!(e.ordered, "the duration consumes the two locations' results");
    assert_eq!(
        calls(e),
        vec![
            call("get_location_home", "get_location_home_1", json!({})),
            call("get_location", "get_location_1", json!({"location_user": "here"})),
            call(
                "get_estimated_duration",
                "get_estimated_duration_1",
                json!({"destination": "$get_location_home_1$", "source": "$get_location_1$"})
            ),
        ]
    );
    // line 85: GET_LOCATION and GET_LOCATION_HOME in one parse stay two different tools.
    let e = example(top(), "eval/navigation/83");
    let names: Vec<&str> = e.output.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["get_location", "get_location_home", "get_estimated_duration"]
    );
    assert_eq!(e.output[0].arguments["category_location"], "the ball park");
    assert_eq!(e.output[1].arguments["contact"], "I");
    assert!(
        e.tools.len() > 3,
        "the toolkit is the navigation domain's intents (issue 30)"
    );
}

#[test]
fn topv2_unsupported_rows_are_dropped() {
    // navigation_train.tsv line 3: IN:UNSUPPORTED_NAVIGATION.
    let d = top().splits["train"]
        .drops
        .iter()
        .find(|d| d.id == "train/navigation/1")
        .unwrap();
    assert_eq!(d.reason, "unsupported_intent");
    let unsupported = top()
        .splits
        .values()
        .flat_map(|o| &o.drops)
        .filter(|d| d.reason == "unsupported_intent")
        .count();
    assert_eq!(unsupported, 6538, "the corpus README's count");
    let attempted: usize = top().splits.values().map(|o| o.attempted).sum();
    assert_eq!(attempted, 180_542);
    assert!(top().bad_records.is_empty());
}

#[test]
fn every_call_validates_and_every_value_is_grounded() {
    for (name, c) in [("atis", atis()), ("snips", snips()), ("topv2", top())] {
        if name != "topv2" {
            // Independent clauses: the order of the calls is not part of the answer.
            assert!(
                c.splits.values().flat_map(|o| &o.examples).all(|e| !e.ordered),
                "{name}"
            );
        }
        assert_eq!(c.stats["calls_failing_schema"], 0, "{name}");
        assert_eq!(c.stats["ungrounded_values"], 0, "{name}");
        for o in c.splits.values() {
            assert_eq!(o.attempted, o.examples.len() + o.drops.len(), "{name}");
        }
    }
}

#[test]
fn seq_atis_builds_with_a_clean_report() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, store) = (tmp.path().join("out"), tmp.path().join("store"));
    toolforge::pipeline::build_and_emit(&root().join("recipes/seq-atis.toml"), Some(&out), Some(&store), false)
        .unwrap();
    let r: Value =
        serde_json::from_slice(&std::fs::read(out.join("seq-atis/report/verification.json")).unwrap()).unwrap();
    assert_eq!(r["stats"]["calls_failing_schema"], 0);
    assert_eq!(r["attempted"], 13162 + 759 + 828);
    for split in ["train", "dev", "test"] {
        assert!(out.join(format!("seq-atis/data/{split}.parquet")).is_file());
    }
}

/// A one-file MixATIS-format corpus in a temp dir, without reference corpus.
fn fixture(dev: &str) -> (tempfile::TempDir, ResolvedSource) {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("mix");
    std::fs::create_dir_all(&corpus).unwrap();
    std::fs::write(corpus.join("dev.txt"), dev).unwrap();
    let mut s = source("seq-atis");
    s.root = corpus.clone();
    s.questions = corpus.join("dev.txt");
    (tmp, s)
}

fn tagged(sentence: &str, intents: &str) -> String {
    let mut s: String = sentence.split(' ').map(|w| format!("{w} O\n")).collect();
    s.push_str(intents);
    s.push_str("\n\n");
    s
}

#[test]
fn fixtures_drop_what_cannot_be_reconciled() {
    let text = [
        tagged("show flights to boston", "atis_flight#atis_airfare"), // no connector
        tagged("show flights and fares and meals", "atis_flight#atis_airfare"), // two splits, no reference
        "what O\nis O\n\n".to_string(),                               // no intent line
        tagged("show flights , fares", "atis_flight#atis_airfare"),
        tagged("show flights and also fares", "atis_flight#atis_airfare"), // "and also" or "and" + "also fares"
    ]
    .concat();
    let (_tmp, s) = fixture(&text);
    let c = nlu::convert(&s, Some("dev")).unwrap();
    let dev = &c.splits["dev"];
    let reasons: Vec<(&str, &str)> = dev.drops.iter().map(|d| (d.id.as_str(), d.reason.as_str())).collect();
    assert_eq!(
        reasons,
        vec![
            ("dev/0", "clause_intent_mismatch"),
            ("dev/1", "ambiguous_split"),
            ("dev/4", "ambiguous_split")
        ]
    );
    assert_eq!(c.bad_records.len(), 1);
    assert_eq!(c.bad_records[0].record, 2);
    assert!(
        c.bad_records[0].message.contains("no intent line"),
        "{:?}",
        c.bad_records
    );
    assert!(c.bad_records[0].file.ends_with("dev.txt"));
    let kept = &dev.examples[0];
    assert_eq!(kept.id, "dev/3");
    assert_eq!(kept.output[1].name, "atis_airfare");
    assert_eq!(kept.output[1].label, "atis_airfare_1");
    assert_eq!(kept.meta.as_ref().unwrap()["split_method"], "conjunction");
}

#[test]
fn missing_split_files_are_an_error_naming_the_root() {
    let (_tmp, s) = fixture("");
    let err = nlu::convert(&s, Some("train")).unwrap_err().to_string();
    assert!(err.contains("train"), "{err}");
}

#[test]
fn topv2_filtered_as_api_blend_sizes_reasons_and_no_conflicting_gold() {
    // Issue 15: per split kept rows and drops by reason (was 120,014 / 16,509 / 37,454 kept).
    let c = top();
    let kept: Vec<usize> = ["train", "eval", "test"]
        .iter()
        .map(|s| c.splits[*s].examples.len())
        .collect();
    assert_eq!(kept, vec![97_477, 12_414, 27_712]);
    let paper = [94_458.0, 13_477.0];
    for (k, p) in kept.iter().zip(paper) {
        assert!((*k as f64 - p).abs() / p <= 0.10, "{k} vs the paper's {p}");
    }
    let reasons = |split: &str| {
        let mut m = std::collections::BTreeMap::new();
        for d in &c.splits[split].drops {
            *m.entry(d.reason.as_str()).or_insert(0usize) += 1;
        }
        m
    };
    let train = reasons("train");
    assert_eq!(train["duplicate_utterance"], 17_101);
    assert_eq!(train["conflicting_gold"], 1_316);
    assert_eq!(train["repeated_slot"], 4_120);
    assert!(!train.contains_key("seen_in_earlier_split"));
    assert_eq!(reasons("eval")["seen_in_earlier_split"], 2_963);
    assert_eq!(reasons("test")["seen_in_earlier_split"], 7_041);
    // "Cancel all alarms": 39 rows, one labelled create_alarm → every row goes.
    let cancel: Vec<_> = c
        .splits
        .values()
        .flat_map(|o| &o.drops)
        .filter(|d| d.reason == "conflicting_gold" && d.id.starts_with("train/alarm/"))
        .collect();
    assert!(!cancel.is_empty());
    assert!(
        !c.splits
            .values()
            .flat_map(|o| &o.examples)
            .any(|e| e.input.eq_ignore_ascii_case("cancel all alarms"))
    );
    // Every kept utterance occurs once in the whole dataset: no duplicate, no conflicting gold.
    let mut seen = std::collections::HashSet::new();
    for e in c.splits.values().flat_map(|o| &o.examples) {
        let u = e.input.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
        assert!(seen.insert(u), "{} repeats an utterance", e.id);
        // No call holds an array: a slot repeated in one intent drops the row.
        assert!(
            e.output.iter().all(|c| c.arguments.values().all(|v| v.is_string())),
            "{}",
            e.id
        );
        // ordered ⇔ some call consumes an earlier call's $label$.
        let refs = e
            .output
            .iter()
            .flat_map(|c| c.arguments.values())
            .any(|v| v.as_str().is_some_and(|s| s.starts_with('$')));
        assert_eq!(e.ordered, refs, "{}", e.id);
    }
}

/// The gold tool names of a row, as a set.
fn gold_set(e: &Example) -> std::collections::BTreeSet<&str> {
    e.output.iter().map(|c| c.name.as_str()).collect()
}

/// Issue 30 item 1 (API-BLEND §5.7.2: the model gets "the possible list of APIs and parameters …
/// from the original dataset's API specifications"): SeqATIS and SeqSNIPS rows carry every intent
/// of the corpus, read here from the raw intent lines (`#`-joined), one list shared by all rows.
/// Was: 100% of rows carried exactly their gold tools.
#[test]
fn seq_nlu_rows_carry_every_intent_of_the_corpus_not_the_gold_set() {
    for (name, c, dir) in [("atis", atis(), "mixatis_clean"), ("snips", snips(), "mixsnips_clean")] {
        // Distinct intents of the raw corpus: the last field of each `label` line / intent line.
        let base = root().join("../shared/corpora").join(dir);
        let mut intents = std::collections::BTreeSet::new();
        for f in ["train/label", "dev.txt", "test.txt"] {
            let text = std::fs::read_to_string(base.join(f)).unwrap();
            for line in text.lines() {
                let l = line.trim();
                // AGIF files: token lines hold a space (`token TAG`); the intent line does not.
                if !l.is_empty() && !l.contains(' ') {
                    intents.extend(l.split('#').map(str::to_string));
                }
            }
        }
        let names: Vec<&str> = c.catalog.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), intents.len(), "{name}: {intents:?} vs {names:?}");
        let rows: Vec<&Example> = c.splits.values().flat_map(|o| &o.examples).collect();
        let mut only_gold = 0;
        for e in &rows {
            let toolkit: Vec<&str> = e.tools.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(
                toolkit, names,
                "{name} {}: the toolkit is the corpus's intent list",
                e.id
            );
            only_gold += (toolkit.iter().copied().collect::<std::collections::BTreeSet<_>>() == gold_set(e)) as usize;
        }
        eprintln!(
            "seq-{name}: {} rows, {} tools each, {only_gold} rows whose toolkit is only the gold set",
            rows.len(),
            names.len()
        );
        assert_eq!(only_gold, 0);
        // One shared list: every row's toolkit is the same allocation.
        assert!(
            rows.iter().all(|e| e.tools.id() == rows[0].tools.id()),
            "{name}: toolkit copied per row"
        );
    }
}

/// Issue 30 item 1: a SeqTopV2 row carries every intent of its domain, judged against the raw
/// TSV parses (every `IN:` label of that domain's files, lower-cased), never only its gold set.
#[test]
fn seq_topv2_rows_carry_their_domains_intents_not_the_gold_set() {
    let dir = root().join("../shared/corpora/topv2");
    let mut by_domain: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "tsv") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines().skip(1) {
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() < 3 {
                continue;
            }
            let set = by_domain.entry(f[0].to_string()).or_default();
            for tok in f[2].split_whitespace().filter_map(|t| t.strip_prefix("[IN:")) {
                set.insert(tok.to_lowercase());
            }
        }
    }
    let mut only_gold = 0;
    let mut rows = 0;
    for e in top().splits.values().flat_map(|o| &o.examples) {
        rows += 1;
        let domain = e.meta.as_ref().unwrap()["domain"].as_str().unwrap();
        let toolkit: std::collections::BTreeSet<&str> = e.tools.iter().map(|t| t.name.as_str()).collect();
        assert!(gold_set(e).is_subset(&toolkit), "{}", e.id);
        assert!(
            toolkit.iter().all(|t| by_domain[domain].contains(*t)),
            "{}: a tool outside domain {domain}",
            e.id
        );
        only_gold += (toolkit == gold_set(e)) as usize;
    }
    eprintln!("seq-topv2: {rows} rows, {only_gold} whose toolkit is only the gold set");
    assert_eq!(only_gold, 0);
}
