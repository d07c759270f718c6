//! Large REST databases (issue 46 item 3): a database is one REST compile item (its endpoints are
//! shared across its questions), and its trajectory segment used to be built whole — every row's
//! lines in three forms at once —, so a build's peak memory grew with the questions of its
//! largest database. It is now cut into chunks of `CHUNK_EXAMPLES` verified examples; these tests
//! build a database of 360 questions (Spider dev's `world_1`, each question three times, reworded)
//! and require the sharded build (chunks claimed by one shard, read back by the merge) to equal
//! the whole build byte for byte, and the Parquet rows to stay one part (as well compressed as
//! before). Peak memory at 1×, 4× and 16× is a benchmark figure (`benches/rest_memory.sh`).

mod tree;

use std::path::{Path, PathBuf};
use std::process::Command;

fn spider() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora/spider")
}

/// A Spider-layout corpus at `dir`: `world_1`'s dev questions `copies` times (copy k reworded
/// with " (copy k)"), Spider's tables.json and a link to the database.
pub fn world_copies(dir: &Path, copies: usize) {
    let dev: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(spider().join("dev.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    for k in 0..copies {
        for q in dev.iter().filter(|q| q["db_id"] == "world_1") {
            let mut q = q.clone();
            if k > 0 {
                q["question"] = format!("{} (copy {k})", q["question"].as_str().unwrap()).into();
            }
            out.push(q);
        }
    }
    std::fs::create_dir_all(dir.join("database")).unwrap();
    std::fs::write(dir.join("dev.json"), serde_json::to_vec(&out).unwrap()).unwrap();
    std::fs::copy(spider().join("tables.json"), dir.join("tables.json")).unwrap();
    std::os::unix::fs::symlink(spider().join("database/world_1"), dir.join("database/world_1")).unwrap();
}

fn build(corpus: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .args(["build", "rest-spider", "--quiet", "--no-html"])
        .args(args)
        .env("TOOLFORGE_SPIDER_DEV", corpus)
        .env_remove("TOOLFORGE_STORE")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "toolforge build {args:?}: {text}");
    text
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_rest_database_cut_into_chunks_builds_the_same_bytes_whole_and_sharded() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    world_copies(&corpus, 3);
    let (whole, merged) = (tmp.path().join("whole"), tmp.path().join("merged"));
    build(
        &corpus,
        &["--out", s(&whole), "--store", s(&tmp.path().join("store-whole"))],
    );
    let shared = tmp.path().join("store-shared");
    // Round one (the compile items), round two (the later items: the chunks), then the merge.
    for _round in 0..2 {
        for i in 0..2 {
            build(&corpus, &["--store", s(&shared), "--shard", &format!("{i}/2")]);
        }
    }
    build(&corpus, &["--out", s(&merged), "--store", s(&shared), "--merge"]);
    tree::assert_same_tree(&whole.join("rest-spider"), &merged.join("rest-spider"));
    let lines = std::fs::read_to_string(whole.join("rest-spider/trajectories/dev.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert!(
        lines > 2 * 128,
        "the database spans several chunks: {lines} trajectories"
    );
}

#[test]
fn a_chunked_rest_database_keeps_its_parquet_rows_in_one_part() {
    // One part per database: the row groups hold as many rows as the writer's byte budget lets
    // them (chunk-sized parts compressed 6× worse: 604 KB against 101 KB on world_1 ×16).
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    world_copies(&corpus, 3);
    let out = tmp.path().join("out");
    build(&corpus, &["--out", s(&out), "--store", s(&tmp.path().join("store"))]);
    let file = std::fs::File::open(out.join("rest-spider/data/dev.parquet")).unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    use parquet::file::reader::FileReader;
    let meta = reader.metadata();
    let rows: i64 = meta.row_groups().iter().map(|g| g.num_rows()).sum();
    let bytes: i64 = meta.row_groups().iter().map(|g| g.total_byte_size()).sum();
    let budget = toolforge::emit::rows::ROW_GROUP_BYTES as i64;
    let expected = ((bytes + budget - 1) / budget).max(1) as usize;
    assert!(rows > 256, "{rows} rows");
    assert!(
        meta.num_row_groups() <= expected + 1,
        "{} row groups for {rows} rows, {bytes} bytes (budget {budget} per group)",
        meta.num_row_groups()
    );
}
