//! The seq readers (API-BLEND sources): the first byte picks the format, the rest is one data
//! file placed where that reader looks for it, beside the real corpus's other files (schemas,
//! databases) — ATIS/SNIPS `train.txt`, TopV2 `alarm_train.tsv`, SGD `train/dialogues_001.json`,
//! MultiWOZ `MultiWOZ_2.1/train.json`. Bad records must be counted, never a panic.
#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use toolforge::recipe::{ResolvedSource, SourceManifest};
use toolforge::seq;

fn project() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn source(manifest: &str, root: &Path, questions: &str) -> ResolvedSource {
    ResolvedSource {
        manifest: SourceManifest::load(&project().join("sources").join(manifest)).expect("manifest"),
        root: root.to_path_buf(),
        questions: root.join(questions),
        databases: root.to_path_buf(),
        tables: None,
    }
}

fn link(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).expect("mkdir");
    std::os::unix::fs::symlink(from, to).expect("symlink");
}

fuzz_target!(|data: &[u8]| {
    let Some((&kind, file)) = data.split_first() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let corpora = project().join("../shared/corpora");
    match kind % 4 {
        0 => {
            std::fs::write(root.join("train.txt"), file).expect("write");
            let _ = seq::nlu::convert(&source("mixatis.toml", root, "train.txt"), Some("train"));
        }
        1 => {
            std::fs::write(root.join("alarm_train.tsv"), file).expect("write");
            let _ = seq::topv2::convert(&source("topv2.toml", root, "alarm_train.tsv"), Some("train"));
        }
        2 => {
            std::fs::create_dir(root.join("train")).expect("mkdir");
            link(&corpora.join("sgd/train/schema.json"), &root.join("train/schema.json"));
            std::fs::write(root.join("train/dialogues_001.json"), file).expect("write");
            let _ = seq::sgd::convert(&source("sgd.toml", root, "train/schema.json"), Some("train"));
        }
        _ => {
            let real = corpora.join("multiwoz");
            link(&real.join("MultiWOZ_2.2/schema.json"), &root.join("MultiWOZ_2.2/schema.json"));
            link(&real.join("MultiWOZ_2.1/db"), &root.join("MultiWOZ_2.1/db"));
            std::fs::write(root.join("MultiWOZ_2.1/train.json"), file).expect("write");
            let _ = seq::multiwoz::convert(&source("multiwoz.toml", root, "MultiWOZ_2.1/train.json"), Some("train"));
        }
    }
});
