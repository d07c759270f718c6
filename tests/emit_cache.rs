//! Issue 17: emitting at the cost of writing. The trajectories of each group are stored like the
//! compile stages, so an `out/`-only rebuild reads them back instead of executing every call
//! again, and gives the same bytes. Real corpora (BIRD mini-dev's superhero), real SQLite, real
//! store.

mod tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use toolforge::dataset::{Build, Example};
use toolforge::emit::trajectories::cached::{GroupLines, Line, is_original};
use toolforge::pipeline::{build_and_emit, compile};
use toolforge::store::Store;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` but `MANIFEST.json` (its build key may differ), by relative path.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = tree::files(dir);
    out.retain(|rel, _| Path::new(rel).file_name().is_some_and(|n| n != "MANIFEST.json"));
    out
}

/// The lines of every group of `build`, in group order, through `GroupLines`.
fn all_lines(
    build: &Build,
    store: &Store,
    compute: &(dyn Fn(&[&Example]) -> anyhow::Result<Vec<Line>> + Sync),
) -> Vec<Line> {
    let stored = GroupLines::new(build, Some(store));
    build
        .groups
        .iter()
        .flat_map(|(group, outcome)| {
            let originals: Vec<&Example> = outcome.examples.iter().filter(|e| is_original(e)).collect();
            stored.of(group, &originals, compute).unwrap()
        })
        .collect()
}

#[test]
fn out_only_rebuild_reads_trajectories_from_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store_dir = tmp.path().join("store");
    let recipe = root().join("recipes/slot-bird.toml");
    let build = compile(&recipe, Some(&store_dir), false).unwrap();
    let store = Store::open(&store_dir).unwrap();
    let computed = AtomicUsize::new(0);
    let compute = |examples: &[&Example]| {
        computed.fetch_add(examples.len(), Ordering::SeqCst);
        Ok::<_, anyhow::Error>(
            examples
                .iter()
                .map(|e| Line {
                    clean: Some(e.id.clone()),
                    ..Line::default()
                })
                .collect::<Vec<_>>(),
        )
    };
    let first = all_lines(&build, &store, &compute);
    let verified = computed.load(Ordering::SeqCst);
    assert!(verified > 0, "superhero has verified examples");
    assert_eq!(first.len(), verified);
    let again = all_lines(&build, &store, &compute);
    assert_eq!(
        computed.load(Ordering::SeqCst),
        verified,
        "second pass executes nothing"
    );
    assert_eq!(first, again);
}

#[test]
fn out_only_rebuild_and_stored_trajectories_give_the_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, store) = (tmp.path().join("out"), tmp.path().join("store"));
    let recipe = root().join("recipes/slot-bird.toml");
    build_and_emit(&recipe, Some(&out), Some(&store), false).unwrap();
    let cold = files(&out.join("slot-bird"));
    assert!(cold.keys().any(|k| k.starts_with("trajectories/")), "{:?}", cold.keys());
    std::fs::remove_dir_all(&out).unwrap();
    build_and_emit(&recipe, Some(&out), Some(&store), false).unwrap();
    assert_eq!(files(&out.join("slot-bird")), cold, "out/-only rebuild from the store");
}
