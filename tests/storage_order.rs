//! Storage order never decides a kept row (issue 27: "store rows shuffled … and require the same
//! answers"; issue 48: one rule for every family): every Spider dev database copied with each
//! table's rows stored in reverse rowid order, and in a shuffled order, must give slot-spider and
//! rest-spider the same kept rows as the original storage, and each kept row's gold answer must
//! equal the original build's as a multiset, and in order up to the row's declared ties
//! (`meta.order_ties`) where its order matters. The original rest-spider catalog is also checked
//! for endpoint names ending in a disambiguating number (issue 48: a name says how two
//! endpoints differ).

mod corpus_support;

use std::collections::BTreeMap;
use std::path::Path;

use toolforge::verify::{Datum, compare, ties_from_meta};

/// Copies `src` to `dst` with the same schema and every table's rows inserted in the order
/// `order` (an ORDER BY over `rowid`).
fn reordered_copy(src: &Path, dst: &Path, order: &str) {
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
            "INSERT INTO main.\"{t}\" SELECT * FROM orig.\"{t}\" ORDER BY {order}"
        ))
        .unwrap();
    }
}

/// The storage orders every family must agree on: reversed, and a fixed shuffle (a
/// multiplicative hash of the rowid).
const ORDERS: [(&str, &str); 2] = [
    ("reversed", "rowid DESC"),
    ("shuffled", "(rowid * 2654435761) % 4294967311, rowid"),
];

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

/// The function names of a built REST dataset's catalog.
fn function_names(dir: &Path) -> Vec<String> {
    let functions: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("tools/functions.json")).unwrap()).unwrap();
    functions
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn spider_dev_with_rows_stored_in_other_orders_keeps_the_same_rows_and_answers() {
    let original = corpus_support::spider_corpus();
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    corpus_support::use_spider_corpus(&plain, &original);
    let mut trees = Vec::new();
    for (name, order) in ORDERS {
        let tree = tmp.path().join(name);
        let corpus = tree.join("corpus");
        for entry in std::fs::read_dir(original.join("database")).unwrap() {
            let db = entry.unwrap().file_name().to_string_lossy().into_owned();
            let src = original.join("database").join(&db).join(format!("{db}.sqlite"));
            if src.exists() {
                std::fs::create_dir_all(corpus.join("database").join(&db)).unwrap();
                reordered_copy(
                    &src,
                    &corpus.join("database").join(&db).join(format!("{db}.sqlite")),
                    order,
                );
            }
        }
        for f in ["dev.json", "tables.json"] {
            std::fs::copy(original.join(f), corpus.join(f)).unwrap();
        }
        corpus_support::use_spider_corpus(&tree, &corpus);
        trees.push((name, tree));
    }
    let mut failures = Vec::new();
    for recipe in ["slot-spider", "rest-spider"] {
        let a = kept(&plain, recipe, "store");
        if recipe == "rest-spider" {
            // `…_2` told apart from `…` by its number; a column's own digits (`line_2`) are no
            // disambiguating number: no other name starts with what precedes them.
            let names = function_names(&plain.join("out").join(recipe));
            let numbered: Vec<String> = names
                .iter()
                .filter(|n| {
                    let Some((head, tail)) = n.rsplit_once('_') else {
                        return false;
                    };
                    !tail.is_empty()
                        && tail.chars().all(|c| c.is_ascii_digit())
                        && names.iter().any(|o| o != *n && o.starts_with(head))
                })
                .cloned()
                .collect();
            println!("rest-spider names ending in a number: {numbered:?}");
            if !numbered.is_empty() {
                failures.push(format!("rest-spider names ending in a number: {numbered:?}"));
            }
        }
        for (name, tree) in &trees {
            let b = kept(tree, recipe, "store");
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
                "{recipe} kept {} (original storage order) / {} ({name}); kept by one only: {}; answers differing: {}",
                a.len(),
                b.len(),
                only.len(),
                differ.len()
            );
            if !only.is_empty() {
                failures.push(format!("{recipe}, {name}: kept by one storage order only: {only:?}"));
            }
            if !differ.is_empty() {
                failures.push(format!(
                    "{recipe}, {name}: answers decided by storage order:\n{}",
                    differ.join("\n")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
