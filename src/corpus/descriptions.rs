//! Column descriptions of a text-to-SQL database, the text the SLOT/SEL toolkits and REST
//! parameter descriptions show for a column: BIRD `database_description/<table>.csv`
//! ([`bird_descriptions`]) and Spider `tables.json` ([`spider_descriptions`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::{CorpusError, parse_json, read_bytes};

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
/// `column_names_original[i] = [table index, column]` pairs with `column_names[i] = [table index,
/// readable name]`; keys are lower-cased. A file whose records all have the expected shape is read
/// straight into those fields ([`well_formed`]); any other is read as JSON values, records and
/// pairs of another shape skipped ([`described`]). Errors: the file cannot be read or is not JSON.
pub fn spider_descriptions(path: &Path) -> Result<BTreeMap<String, Descriptions>, CorpusError> {
    let bytes = read_bytes(path)?;
    match well_formed(&bytes) {
        Some(out) => Ok(out),
        None => Ok(described(&parse_json(path, &bytes)?)),
    }
}

/// The descriptions of a `tables.json` every record of which has a string `db_id`, a list of
/// string `table_names_original` and `[integer, string]` pairs in `column_names_original` and
/// `column_names` (other fields unread: every database's description read by every build and
/// shard, issue 34); `None` for any other file. Same result as [`described`] gives.
fn well_formed(bytes: &[u8]) -> Option<BTreeMap<String, Descriptions>> {
    use std::borrow::Cow;
    #[derive(serde::Deserialize)]
    struct Db<'a> {
        #[serde(borrow)]
        db_id: Cow<'a, str>,
        #[serde(borrow)]
        table_names_original: Vec<Cow<'a, str>>,
        #[serde(borrow)]
        column_names_original: Vec<(i64, Cow<'a, str>)>,
        #[serde(borrow)]
        column_names: Vec<(i64, Cow<'a, str>)>,
    }
    let dbs: Vec<Db> = serde_json::from_slice(bytes).ok()?;
    let mut out = BTreeMap::new();
    for db in dbs {
        let mut descs = Descriptions::new();
        for ((t, c), (_, name)) in db.column_names_original.iter().zip(&db.column_names) {
            if let Some(table) = usize::try_from(*t).ok().and_then(|t| db.table_names_original.get(t)) {
                descs
                    .entry(table.to_lowercase())
                    .or_default()
                    .insert(c.to_lowercase(), name.to_string());
            }
        }
        out.insert(db.db_id.into_owned(), descs);
    }
    Some(out)
}

/// The descriptions of a `tables.json` read as JSON (any shape): records without a string
/// `db_id` are skipped, as are column pairs not of the shape [`spider_descriptions`] reads.
fn described(value: &Json) -> BTreeMap<String, Descriptions> {
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
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_formed_tables_file_reads_to_what_its_json_values_give() {
        // The judge: the reading of the same text as JSON values, record by record.
        let real = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora/spider/tables.json"),
        )
        .unwrap_or_else(|_| "[]".into());
        let value: Json = serde_json::from_str(&real).unwrap();
        let fast = well_formed(real.as_bytes()).expect("Spider's tables.json is well formed");
        assert_eq!(fast, described(&value));
        let record = |extra: &str| {
            format!(
                r#"[{{"db_id":"d","table_names_original":["T\u0041","b"],"column_names_original":[[-1,"*"],[0,"Id"],[1,"X"]{extra}],"column_names":[[-1,"*"],[0,"the id"],[1,"ex"]],"foreign_keys":[]}}]"#
            )
        };
        let texts = [
            record(""),
            // A pair of another shape, a record without db_id, a table name that is not text.
            record(r#",["0","Y"]"#),
            r#"[{"table_names_original":["t"]},{"db_id":"e","table_names_original":[1,"u"],"column_names_original":[[1,"c"]],"column_names":[[1,"see"]]}]"#.to_string(),
            r#"[1, {"db_id":"f"}]"#.to_string(),
            "{}".to_string(),
        ];
        for text in texts {
            let value: Json = serde_json::from_str(&text).unwrap();
            let expected = described(&value);
            if let Some(fast) = well_formed(text.as_bytes()) {
                assert_eq!(fast, expected, "{text}");
            }
        }
        assert!(well_formed(record("").as_bytes()).is_some());
        assert!(well_formed(record(r#",["0","Y"]"#).as_bytes()).is_none());
        let first = described(&serde_json::from_str(&record("")).unwrap());
        assert_eq!(first["d"]["ta"]["id"], "the id");
    }
}
