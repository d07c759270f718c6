//! Column descriptions of a text-to-SQL database, the text the SLOT/SEL toolkits and REST
//! parameter descriptions show for a column: BIRD `database_description/<table>.csv`
//! ([`bird_descriptions`]) and Spider `tables.json` ([`spider_descriptions`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::{CorpusError, read_json};

/// Column descriptions of one database: lower-cased `table` → lower-cased `column` → text.
pub type Descriptions = BTreeMap<String, BTreeMap<String, String>>;

/// BIRD `database_description/*.csv` of one database (empty when the folder is absent).
/// The description is `column_description`, else `column_name`; unreadable files are skipped.
pub fn bird_descriptions(db_dir: &Path) -> Descriptions {
    let mut out = Descriptions::new();
    let Ok(entries) = std::fs::read_dir(db_dir.join("database_description")) else {
        return out;
    };
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    for file in files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")))
    {
        let Ok(bytes) = std::fs::read(&file) else { continue };
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim_start_matches('\u{feff}');
        let table = file
            .file_stem()
            .map(|s| s.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(text.as_bytes());
        let cols = out.entry(table).or_default();
        for row in reader.records().flatten() {
            let get = |i: usize| {
                row.get(i)
                    .map(|s| s.trim().replace(['\n', '\r'], " "))
                    .unwrap_or_default()
            };
            let (column, name, desc) = (get(0), get(1), get(2));
            let text = if !desc.is_empty() { desc } else { name };
            if !column.is_empty() {
                cols.insert(column.to_lowercase(), text);
            }
        }
    }
    out
}

/// Spider `tables.json`: per database, the readable column names as descriptions.
pub fn spider_descriptions(path: &Path) -> Result<BTreeMap<String, Descriptions>, CorpusError> {
    let value = read_json(path)?;
    let mut out = BTreeMap::new();
    for db in value.as_array().into_iter().flatten() {
        let Some(db_id) = db.get("db_id").and_then(Json::as_str) else {
            continue;
        };
        let tables: Vec<&str> = db
            .get("table_names_original")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(Json::as_str)
            .collect();
        let originals = db.get("column_names_original").and_then(Json::as_array);
        let readable = db.get("column_names").and_then(Json::as_array);
        let mut descs = Descriptions::new();
        if let (Some(orig), Some(read)) = (originals, readable) {
            for (o, r) in orig.iter().zip(read) {
                let (Some(t), Some(c), Some(name)) = (o[0].as_i64(), o[1].as_str(), r[1].as_str()) else {
                    continue;
                };
                if let Some(table) = usize::try_from(t).ok().and_then(|t| tables.get(t)) {
                    descs
                        .entry(table.to_lowercase())
                        .or_default()
                        .insert(c.to_lowercase(), name.to_string());
                }
            }
        }
        out.insert(db_id.to_string(), descs);
    }
    Ok(out)
}
