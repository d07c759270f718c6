//! Recipe TOML in → a validated recipe or an error naming the key; when it parses, its source
//! is resolved as a build would. Any panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolforge::recipe;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("recipe.toml");
    std::fs::write(&path, data).expect("write");
    let _ = recipe::Recipe::load(&path);
    let _ = recipe::SourceManifest::load(&path);
});
