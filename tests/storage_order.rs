//! Storage order never decides a kept row (issue 27: "store rows shuffled … and require the same
//! answers"): every Spider dev database copied with each table's rows stored in reverse rowid
//! order must give slot-spider the same kept rows, and each kept row's gold answer must equal
//! the original build's as a multiset, and in order up to the row's declared ties
//! (`meta.order_ties`) where its order matters.

mod corpus_support;

use std::collections::BTreeMap;
use std::path::Path;

use toolforge::verify::{Datum, compare, ties_from_meta};

/// Copies `src` to `dst` with the same schema and every table's rows inserted in reverse rowid order.
fn reversed_copy(src: &Path, dst: &Path) {
    let conn = rusqlite::Connection::open(dst).unwrap();
    conn.execute("ATTACH DATABASE ?1 AS orig", [src.to_str().unwrap()])
        .unwrap();
    let tables: Vec<(String, String)> = conn
        .prepare("SELECT name, sql FROM orig.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (_, create) in &tables {
        conn.execute_batch(create).unwrap();
    }
    for (t, _) in &tables {
        let t = t.replace('"', "\"\"");
        conn.execute_batch(&format!(
            "INSERT INTO main.\"{t}\" SELECT * FROM orig.\"{t}\" ORDER BY rowid DESC"
        ))
        .unwrap();
    }
}

/// The kept rows of `recipe` built over the tree `tmp`: id → (gold answer, ordered, ties).
fn kept(tmp: &Path, recipe: &str, store: &str) -> BTreeMap<String, (Vec<Vec<Datum>>, bool, Option<Vec<usize>>)> {
    let path = corpus_support::recipe(tmp, recipe);
    let out = tmp.join("out");
    toolforge::pipeline::build_and_emit(&path, Some(&out), Some(&tmp.join(store)), false).unwrap();
    std::fs::read_to_string(out.join(recipe).join("data/dev.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let gold = serde_json::from_str(row["gold_answer"].as_str().unwrap()).unwrap();
            let meta = row["meta"].as_str().map(|m| serde_json::from_str(m).unwrap());
            let entry = (gold, row["ordered"].as_bool().unwrap(), ties_from_meta(meta.as_ref()));
            (row["id"].as_str().unwrap().to_string(), entry)
        })
        .collect()
}

#[test]
fn spider_dev_with_rows_stored_in_reverse_keeps_the_same_rows_and_answers() {
    let original = corpus_support::spider_corpus();
    let tmp = tempfile::tempdir().unwrap();
    let (plain, reversed) = (tmp.path().join("plain"), tmp.path().join("reversed"));
    corpus_support::use_spider_corpus(&plain, &original);
    let corpus = reversed.join("corpus");
    for entry in std::fs::read_dir(original.join("database")).unwrap() {
        let db = entry.unwrap().file_name().to_string_lossy().into_owned();
        let src = original.join("database").join(&db).join(format!("{db}.sqlite"));
        if src.exists() {
            std::fs::create_dir_all(corpus.join("database").join(&db)).unwrap();
            reversed_copy(&src, &corpus.join("database").join(&db).join(format!("{db}.sqlite")));
        }
    }
    for f in ["dev.json", "tables.json"] {
        std::fs::copy(original.join(f), corpus.join(f)).unwrap();
    }
    corpus_support::use_spider_corpus(&reversed, &corpus);
    let a = kept(&plain, "slot-spider", "store");
    let b = kept(&reversed, "slot-spider", "store");
    let only: Vec<&String> = a
        .keys()
        .filter(|k| !b.contains_key(*k))
        .chain(b.keys().filter(|k| !a.contains_key(*k)))
        .collect();
    let mut differ = Vec::new();
    for (id, (gold, ordered, ties)) in &a {
        if let Some((other, _, _)) = b.get(id) {
            if let Err(d) = compare(gold, other, *ordered, ties.as_deref()) {
                differ.push(format!("{id}: {d}"));
            }
        }
    }
    println!(
        "slot-spider kept {} (original storage order) / {} (reversed); kept by one only: {}; answers differing: {}",
        a.len(),
        b.len(),
        only.len(),
        differ.len()
    );
    assert!(only.is_empty(), "kept by one storage order only: {only:?}");
    assert!(
        differ.is_empty(),
        "answers decided by storage order:\n{}",
        differ.join("\n")
    );
}
