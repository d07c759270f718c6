//! Byte-identity of two output trees, shared by the tests that compare builds
//! (`tests/scale.rs`, `tests/scale_ray.rs`, `tests/interrupted_build.rs`, `tests/emit_cache.rs`).
//! Included with `mod tree;`.

use std::collections::BTreeMap;
use std::path::Path;

/// Every file under `dir`, relative path → bytes (sorted by path).
pub fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Asserts that `a` and `b` hold the same files with the same bytes, naming the files that differ.
#[allow(dead_code)]
pub fn assert_same_tree(a: &Path, b: &Path) {
    assert_same_files(&files(a), &files(b), &format!("{} and {}", a.display(), b.display()));
}

/// Asserts that two [`files`] maps are equal: the same file list, then the same bytes per file
/// (the files that differ named); `what` says which trees are compared.
pub fn assert_same_files(fa: &BTreeMap<String, Vec<u8>>, fb: &BTreeMap<String, Vec<u8>>, what: &str) {
    assert_eq!(
        fa.keys().collect::<Vec<_>>(),
        fb.keys().collect::<Vec<_>>(),
        "file lists differ between {what}"
    );
    let differ: Vec<&String> = fa.iter().filter(|(k, v)| fb[*k] != **v).map(|(k, _)| k).collect();
    assert!(differ.is_empty(), "files differ between {what}: {differ:?}");
}
