//! The text-to-SQL corpus readers: the first byte picks the reader, the rest is the file —
//! Spider `dev.json`, BIRD `dev.json`, Spider `tables.json` (descriptions), a BIRD
//! `database_description/*.csv`. Bad records must be counted, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolforge::corpus::{descriptions, questions};

fuzz_target!(|data: &[u8]| {
    let Some((&kind, file)) = data.split_first() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    match kind % 4 {
        0 | 1 => {
            let path = dir.path().join("dev.json");
            std::fs::write(&path, file).expect("write");
            let _ = questions::read_questions(&path, if kind % 4 == 0 { "spider" } else { "bird" });
        }
        2 => {
            let path = dir.path().join("tables.json");
            std::fs::write(&path, file).expect("write");
            let _ = descriptions::spider_descriptions(&path);
        }
        _ => {
            let csv_dir = dir.path().join("database_description");
            std::fs::create_dir(&csv_dir).expect("mkdir");
            std::fs::write(csv_dir.join("table.csv"), file).expect("write");
            let _ = descriptions::bird_descriptions(dir.path());
        }
    }
});
