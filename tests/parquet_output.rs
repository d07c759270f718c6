//! The Parquet files are zstd-compressed in row groups the Hugging Face dataset viewer can read
//! (≤ 64 MiB in memory each; the viewer refuses row groups over ~286 MiB), and stay byte-identical
//! across builds. seq-atis train was 110 MB uncompressed (the repeated `tools` JSON).

use std::path::PathBuf;

use parquet::basic::Compression;
use parquet::file::reader::{FileReader, SerializedFileReader};
use toolforge::pipeline::build_and_emit;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn seq_atis_parquet_is_zstd_under_5mb_in_viewer_sized_row_groups_and_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let recipe = root().join("recipes/seq-atis.toml");
    build_and_emit(
        &recipe,
        Some(&tmp.path().join("a")),
        Some(&tmp.path().join("store")),
        false,
    )
    .unwrap();
    let train = tmp.path().join("a/seq-atis/data/train.parquet");
    let size = std::fs::metadata(&train).unwrap().len();
    assert!(size <= 5_000_000, "seq-atis train.parquet is {size} bytes");
    let reader = SerializedFileReader::new(std::fs::File::open(&train).unwrap()).unwrap();
    let meta = reader.metadata();
    assert!(meta.file_metadata().num_rows() > 1000);
    for rg in meta.row_groups() {
        assert!(
            rg.total_byte_size() <= 64 << 20,
            "row group of {} bytes",
            rg.total_byte_size()
        );
        for c in rg.columns() {
            assert!(matches!(c.compression(), Compression::ZSTD(_)), "{:?}", c.compression());
        }
    }
    // A cold build into another directory gives the same bytes.
    build_and_emit(
        &recipe,
        Some(&tmp.path().join("b")),
        Some(&tmp.path().join("store2")),
        false,
    )
    .unwrap();
    for split in ["train", "dev", "test"] {
        let a = std::fs::read(tmp.path().join(format!("a/seq-atis/data/{split}.parquet")));
        let b = std::fs::read(tmp.path().join(format!("b/seq-atis/data/{split}.parquet")));
        assert!(a.is_ok() || split != "train");
        assert!(a.ok() == b.ok(), "{split}.parquet differs between builds");
    }
}
