//! Record-level decoding errors in every source reader (issue 18): a temp copy of a real corpus
//! with ONE record corrupted (an invalid UTF-8 byte, or a JSON Lines line that is not JSON) is
//! built with the real binary; the build succeeds and the record is counted and named in
//! `report/verification.json` (`bad_record_list`), never fatal.
//!
//! Each corpus copy links every file of `../shared/corpora/<corpus>` that the test needs and
//! writes the corrupted file itself; the source is pointed at it with its `TOOLFORGE_*` variable.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn corpora() -> PathBuf {
    root().join("../shared/corpora")
}

/// How to corrupt the copied file.
enum Corrupt {
    /// Byte `offset` after the `nth` (0-based) occurrence of `needle` becomes 0xFF.
    Utf8After {
        needle: &'static str,
        nth: usize,
        offset: usize,
    },
    /// The first byte of 0-based line `line` becomes 0xFF.
    Utf8Line(usize),
    /// The first byte of 0-based line `line` becomes `x` (the line is no longer JSON).
    JsonLine(usize),
}

fn corrupt(bytes: &mut [u8], how: &Corrupt) {
    let line_start = |n: usize, bytes: &[u8]| {
        if n == 0 {
            0
        } else {
            bytes
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .nth(n - 1)
                .unwrap()
                .0
                + 1
        }
    };
    match *how {
        Corrupt::Utf8After { needle, nth, offset } => {
            let n = needle.as_bytes();
            let at = (0..bytes.len() - n.len())
                .filter(|&i| &bytes[i..i + n.len()] == n)
                .nth(nth)
                .unwrap_or_else(|| panic!("no occurrence {nth} of {needle:?}"));
            bytes[at + n.len() + offset] = 0xff;
        }
        Corrupt::Utf8Line(n) => bytes[line_start(n, bytes)] = 0xff,
        Corrupt::JsonLine(n) => bytes[line_start(n, bytes)] = b'x',
    }
}

/// A copy of `../shared/corpora/<corpus>` under `tmp/<corpus>`: `links` (files or folders) are
/// symlinked, `file` is copied with `how` applied; `siblings` are linked beside it.
fn corpus_copy(tmp: &Path, corpus: &str, links: &[&str], siblings: &[&str], edits: &[(&str, Corrupt)]) -> PathBuf {
    let src = corpora().join(corpus);
    let dst = tmp.join(corpus);
    for l in links {
        let to = dst.join(l);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(src.join(l).canonicalize().unwrap(), &to).unwrap();
    }
    for s in siblings {
        std::os::unix::fs::symlink(corpora().join(s).canonicalize().unwrap(), tmp.join(s)).unwrap();
    }
    for (file, how) in edits {
        let mut bytes = std::fs::read(src.join(file)).unwrap();
        corrupt(&mut bytes, how);
        let to = dst.join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(&to, bytes).unwrap();
    }
    dst
}

/// Builds `recipe` with `env` pointing at `corpus_root`; returns the report's bad records
/// (file, record, message).
fn build(tmp: &Path, recipe: &str, env: &str, corpus_root: &Path) -> Vec<(String, u64, String)> {
    let out = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .args(["build", recipe, "--quiet", "--out"])
        .arg(tmp.join("out"))
        .arg("--store")
        .arg(tmp.join("store"))
        .env(env, corpus_root)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{recipe}: the build failed on one bad record:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.join("out").join(recipe).join("report/verification.json")).unwrap())
            .unwrap();
    report["bad_record_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["file"].as_str().unwrap().to_string(),
                b["record"].as_u64().unwrap(),
                b["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The bad records whose message contains `what`.
fn with<'a>(bad: &'a [(String, u64, String)], what: &str) -> Vec<&'a (String, u64, String)> {
    bad.iter().filter(|b| b.2.contains(what)).collect()
}

#[test]
fn spider_question_with_invalid_utf8_is_one_bad_record() {
    let tmp = tempfile::tempdir().unwrap();
    let edit = Corrupt::Utf8After {
        needle: "\"question\": \"",
        nth: 3,
        offset: 1,
    };
    let c = corpus_copy(
        tmp.path(),
        "spider",
        &["database", "tables.json"],
        &[],
        &[("dev.json", edit)],
    );
    let bad = build(tmp.path(), "rest-spider", "TOOLFORGE_SPIDER_DEV", &c);
    let utf8 = with(&bad, "invalid UTF-8 in field `question`");
    assert_eq!(utf8.len(), 1, "{bad:?}");
    assert_eq!(utf8[0].1, 3);
}

#[test]
fn bird_question_with_invalid_utf8_is_one_bad_record() {
    let tmp = tempfile::tempdir().unwrap();
    let links: Vec<String> = std::fs::read_dir(corpora().join("bird/dev_databases"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "mini_dev_sqlite.json")
        .collect();
    let links: Vec<&str> = links.iter().map(String::as_str).collect();
    let edit = Corrupt::Utf8After {
        needle: "\"question\": \"",
        nth: 0,
        offset: 2,
    };
    let c = corpus_copy(
        tmp.path(),
        "bird/dev_databases",
        &links,
        &[],
        &[("mini_dev_sqlite.json", edit)],
    );
    let bad = build(tmp.path(), "rest-bird", "TOOLFORGE_BIRD_DEV", &c);
    let utf8 = with(&bad, "invalid UTF-8 in field `question`");
    assert_eq!(utf8.len(), 1, "{bad:?}");
    assert_eq!(utf8[0].1, 0);
}

#[test]
fn mixatis_agif_record_with_invalid_utf8_is_one_bad_record() {
    let tmp = tempfile::tempdir().unwrap();
    let c = corpus_copy(
        tmp.path(),
        "mixatis_clean",
        &["test.txt", "train"],
        &["atis"],
        &[("dev.txt", Corrupt::Utf8Line(2))],
    );
    let bad = build(tmp.path(), "seq-atis", "TOOLFORGE_MIXATIS", &c);
    let utf8 = with(&bad, "line 3: invalid UTF-8 at column 1");
    assert_eq!(utf8.len(), 1, "{bad:?}");
    assert!(utf8[0].0.ends_with("dev.txt") && utf8[0].1 == 0, "{utf8:?}");
}

#[test]
fn mixsnips_glgin_line_with_invalid_utf8_is_one_bad_record() {
    let tmp = tempfile::tempdir().unwrap();
    let c = corpus_copy(
        tmp.path(),
        "mixsnips_clean",
        &["dev.txt", "test.txt", "train/label"],
        &["snips"],
        &[("train/seq.in", Corrupt::Utf8Line(10))],
    );
    let bad = build(tmp.path(), "seq-snips", "TOOLFORGE_MIXSNIPS", &c);
    let utf8 = with(&bad, "invalid UTF-8 at column 1");
    assert_eq!(utf8.len(), 1, "{bad:?}");
    assert_eq!(utf8[0].1, 10);
}

#[test]
fn topv2_row_with_invalid_utf8_is_one_bad_record() {
    let tmp = tempfile::tempdir().unwrap();
    let c = corpus_copy(
        tmp.path(),
        "topv2",
        &["weather_train.tsv", "weather_test.tsv"],
        &[],
        &[("weather_eval.tsv", Corrupt::Utf8Line(5))],
    );
    let bad = build(tmp.path(), "seq-topv2", "TOOLFORGE_TOPV2", &c);
    let utf8 = with(&bad, "line 6: invalid UTF-8 at column 1");
    assert_eq!(utf8.len(), 1, "{bad:?}");
    assert!(utf8[0].0.ends_with("weather_eval.tsv"), "{utf8:?}");
}

#[test]
fn sgd_dialogue_with_invalid_utf8_is_one_bad_record() {
    let tmp = tempfile::tempdir().unwrap();
    let edit = Corrupt::Utf8After {
        needle: "\"utterance\": \"",
        nth: 40,
        offset: 1,
    };
    let c = corpus_copy(
        tmp.path(),
        "sgd",
        &["dev/schema.json", "dev/dialogues_002.json"],
        &[],
        &[("dev/dialogues_001.json", edit)],
    );
    let bad = build(tmp.path(), "seq-sgd", "TOOLFORGE_SGD", &c);
    let utf8 = with(&bad, "invalid UTF-8 in field `turns[");
    assert_eq!(utf8.len(), 1, "{bad:?}");
    assert!(utf8[0].0.ends_with("dialogues_001.json"), "{utf8:?}");
}

#[test]
fn multiwoz_dialogue_with_invalid_utf8_is_one_bad_record() {
    let tmp = tempfile::tempdir().unwrap();
    let edit = Corrupt::Utf8After {
        needle: "\"text\": \"",
        nth: 100,
        offset: 1,
    };
    let c = corpus_copy(
        tmp.path(),
        "multiwoz",
        &["MultiWOZ_2.1/db", "MultiWOZ_2.1/valListFile", "MultiWOZ_2.2"],
        &[],
        &[("MultiWOZ_2.1/val.json", edit)],
    );
    let bad = build(tmp.path(), "seq-multiwoz", "TOOLFORGE_MULTIWOZ", &c);
    let utf8 = with(&bad, "invalid UTF-8 in field `log[");
    assert_eq!(utf8.len(), 1, "{bad:?}");
    assert!(utf8[0].0.ends_with("val.json"), "{utf8:?}");
}

#[test]
fn mcp_server_with_invalid_utf8_is_one_bad_record() {
    let tmp = tempfile::tempdir().unwrap();
    let edit = Corrupt::Utf8After {
        needle: "\"description\": \"",
        nth: 3,
        offset: 1,
    };
    let c = corpus_copy(tmp.path(), "mcp", &[], &[], &[("livemcpbench_tools.json", edit)]);
    let bad = build(tmp.path(), "mcp-tools", "TOOLFORGE_MCP", &c);
    assert_eq!(with(&bad, "invalid UTF-8 in field").len(), 1, "{bad:?}");
}

#[test]
fn bfcl_lines_with_invalid_utf8_or_invalid_json_are_bad_records() {
    let tmp = tempfile::tempdir().unwrap();
    let c = corpus_copy(
        tmp.path(),
        "bfcl",
        &["possible_answer"],
        &[],
        &[
            ("BFCL_v4_simple_python.json", Corrupt::Utf8Line(7)),
            ("BFCL_v4_multiple.json", Corrupt::JsonLine(3)),
        ],
    );
    let bad = build(tmp.path(), "bfcl", "TOOLFORGE_BFCL", &c);
    let utf8 = with(&bad, "invalid UTF-8 at column 1");
    assert_eq!(utf8.len(), 1, "{bad:?}");
    assert!(
        utf8[0].0.ends_with("BFCL_v4_simple_python.json") && utf8[0].1 == 7,
        "{utf8:?}"
    );
    let json = with(&bad, "not valid JSON");
    assert_eq!(json.len(), 1, "{bad:?}");
    assert!(
        json[0].0.ends_with("BFCL_v4_multiple.json") && json[0].1 == 3,
        "{json:?}"
    );
}
