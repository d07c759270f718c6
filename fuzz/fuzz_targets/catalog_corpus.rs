//! The catalog readers: the first byte picks the reader, the rest is the file — an MCP registry
//! dump (`livemcpbench_tools.json` shape) or a BFCL category file (`BFCL_v4_simple_python.json`,
//! JSON lines, with its possible-answer file absent). Bad records must be counted, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolforge::catalog::{bfcl, mcp};

fuzz_target!(|data: &[u8]| {
    let Some((&kind, file)) = data.split_first() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    if kind % 2 == 0 {
        let path = root.join("tools.json");
        std::fs::write(&path, file).expect("write");
        let _ = mcp::ingest(&[path], root);
    } else {
        std::fs::write(root.join("BFCL_v4_simple_python.json"), file).expect("write");
        let _ = bfcl::convert(root);
    }
});
