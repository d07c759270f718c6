//! Tables as Arrow record batches, their conversion from SQLite results, and the
//! `initialize_active_data` join step — the only place the tool layer touches SQLite.
//!
//! Column typing: SQLite values are dynamically typed, Arrow columns are not. A column whose
//! non-NULL values are all integers becomes `Int64`; all numbers (integers and reals) `Float64`;
//! all text `Utf8`; numbers and text together a union keeping each cell's storage class
//! ([`mixed`]). BLOBs become lowercase hex text. An all-NULL column is `Utf8`.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use rusqlite::types::ValueRef;

use crate::verify::Datum;

mod budget;
mod materialise;
mod mixed;
mod reuse;

pub use budget::{JoinBudget, JoinRefused, estimate_rows, join_at_within};

/// Converts one SQLite value to a [`Datum`].
pub fn datum_from_sqlite(value: ValueRef<'_>) -> Datum {
    match value {
        ValueRef::Null => Datum::Null,
        ValueRef::Integer(i) => Datum::Int(i),
        ValueRef::Real(r) => Datum::real(r),
        ValueRef::Text(t) => Datum::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Datum::Text(b.iter().map(|x| format!("{x:02x}")).collect()),
    }
}

/// Renders a number the way SQLite's `CAST(x AS TEXT)` does (integers plainly, reals with a
/// decimal point).
pub fn number_text(d: &Datum) -> Option<String> {
    match d {
        Datum::Int(i) => Some(i.to_string()),
        Datum::Real(r) if r.fract() == 0.0 && r.abs() < 1e15 => Some(format!("{r:.1}")),
        Datum::Real(r) => Some(r.to_string()),
        _ => None,
    }
}

/// Builds an Arrow array from datums with the typing rule of the module docs.
pub fn array_from_datums(values: &[Datum]) -> ArrayRef {
    if mixed::mixes_storage_classes(values) {
        return mixed::mixed_array(values);
    }
    let (mut ints, mut reals, mut any) = (true, true, false);
    for v in values {
        match v {
            Datum::Null => {}
            Datum::Int(_) => any = true,
            Datum::Real(_) => (any, ints) = (true, false),
            Datum::Text(_) => (any, ints, reals) = (true, false, false),
        }
    }
    if any && ints {
        Arc::new(
            values
                .iter()
                .map(|v| if let Datum::Int(i) = v { Some(*i) } else { None })
                .collect::<Int64Array>(),
        )
    } else if any && reals {
        Arc::new(values.iter().map(|v| v.as_f64()).collect::<Float64Array>())
    } else {
        // Appended in place: no per-cell `String` copy (the join step's largest cost was the
        // allocator, issue 17).
        let bytes: usize = values
            .iter()
            .map(|v| if let Datum::Text(t) = v { t.len() } else { 0 })
            .sum();
        let mut b = arrow_array::builder::StringBuilder::with_capacity(values.len(), bytes);
        for v in values {
            match v {
                Datum::Null => b.append_null(),
                Datum::Text(t) => b.append_value(t),
                n => b.append_option(number_text(n)),
            }
        }
        Arc::new(b.finish())
    }
}

/// Reads the cell at `row` of an Arrow array as a [`Datum`] (Int64, Float64, Utf8 arrays and the
/// unions of [`mixed`] columns).
pub fn datum_at(array: &dyn Array, row: usize) -> Datum {
    if let Some(union) = array.as_any().downcast_ref::<arrow_array::UnionArray>() {
        return mixed::mixed_datum(union, row);
    }
    if array.is_null(row) {
        return Datum::Null;
    }
    match array.data_type() {
        DataType::Int64 => Datum::Int(array.as_any().downcast_ref::<Int64Array>().unwrap().value(row)),
        DataType::Float64 => Datum::real(array.as_any().downcast_ref::<Float64Array>().unwrap().value(row)),
        DataType::Utf8 => Datum::Text(
            array
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .value(row)
                .to_string(),
        ),
        other => unreachable!("toolforge tables hold Int64, Float64 and Utf8 only, not {other}"),
    }
}

/// All cells of an Arrow array as datums.
pub fn datums(array: &dyn Array) -> Vec<Datum> {
    (0..array.len()).map(|r| datum_at(array, r)).collect()
}

/// Builds a record batch from named columns of datums (all of one length).
pub fn batch_from_columns(names: &[String], columns: Vec<Vec<Datum>>) -> RecordBatch {
    let rows = columns.first().map_or(0, Vec::len);
    batch_of_arrays(names, columns.iter().map(|c| array_from_datums(c)).collect(), rows)
}

/// A record batch of `rows` rows from named arrays (all of that length; every field nullable,
/// of its array's type).
fn batch_of_arrays(names: &[String], arrays: Vec<ArrayRef>, rows: usize) -> RecordBatch {
    let fields: Vec<Field> = names
        .iter()
        .zip(&arrays)
        .map(|(n, a)| Field::new(n, a.data_type().clone(), true))
        .collect();
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options).expect("columns of equal length")
}

/// Column name as the join step exposes it: `<table>_<column>`, with spaces → `_`, `(`/`)`
/// dropped, `/` and `-` → `_` (Live API-Bench `make_safe`).
pub fn safe_name(table: &str, column: &str) -> String {
    let raw = format!("{}_{}", table.trim(), column.trim());
    raw.replace(' ', "_").replace(['(', ')'], "").replace(['/', '-'], "_")
}

/// One joined table instance of the join step: a table of the database under an alias, with the
/// prefix its columns get (`<table>`, or `<table>_<n>` for the n-th repeated use of a table, as
/// the reference's `modified_table_name`).
#[derive(Debug, Clone, PartialEq)]
pub struct JoinTable {
    /// The alias in the query (the table name when unaliased).
    pub alias: String,
    /// The table's name as the database spells it.
    pub table: String,
    /// Prefix of this instance's columns.
    pub prefix: String,
}

/// The table instances of an `alias_to_table_dict`, in join order. Each value is the
/// reference's `{"original_table_name": t, "modified_table_name": prefix}` (Live API-Bench
/// Listing 10); a plain table-name string (rows built before the reference shape) is read as
/// `{original_table_name: t}` with the prefix `<table>`, or `<table>_<n>` for the n-th repeated
/// use of a table.
pub fn join_tables(aliases: &serde_json::Map<String, serde_json::Value>) -> Result<Vec<JoinTable>, JoinError> {
    let mut uses: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (alias, entry) in aliases {
        let (table, modified) = match entry {
            serde_json::Value::String(t) => (t.as_str(), None),
            serde_json::Value::Object(o) => {
                let field = |k: &str| o.get(k).and_then(serde_json::Value::as_str);
                let table = field("original_table_name").ok_or_else(|| {
                    JoinError::Invalid(format!("alias {alias:?}: `original_table_name` must be a string"))
                })?;
                (table, field("modified_table_name"))
            }
            _ => {
                return Err(JoinError::Invalid(format!(
                    "alias {alias:?}: expected {{original_table_name, modified_table_name}}"
                )));
            }
        };
        let n = uses.entry(table.to_lowercase()).or_insert(0);
        let prefix = match modified {
            Some(m) => m.to_string(),
            None if *n == 0 => table.to_string(),
            None => format!("{table}_{n}"),
        };
        *n += 1;
        out.push(JoinTable {
            alias: alias.clone(),
            table: table.to_string(),
            prefix,
        });
    }
    Ok(out)
}

/// The reference's `alias_to_table_dict` of table instances:
/// `{alias: {"original_table_name": table, "modified_table_name": prefix}}` (Listing 10).
pub fn alias_to_table_dict(tables: &[JoinTable]) -> serde_json::Map<String, serde_json::Value> {
    tables
        .iter()
        .map(|t| {
            (
                t.alias.clone(),
                serde_json::json!({"original_table_name": t.table, "modified_table_name": t.prefix}),
            )
        })
        .collect()
}

/// One equality of a join condition, serialised as the reference's triple
/// `["<alias>.<column>", "<alias>.<column>", "INNER"|"LEFT"]`: the second column belongs to the
/// table being joined.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JoinCondition(
    /// `alias.column` of an earlier table.
    pub String,
    /// `alias.column` of the table being joined.
    pub String,
    /// `INNER` or `LEFT`.
    pub String,
);

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

fn quote_qualified(col: &str) -> String {
    match col.split_once('.') {
        Some((a, c)) => format!("{}.{}", quote(a), quote(c)),
        None => quote(col),
    }
}

/// The columns of `table` as the database declares them (`PRAGMA table_info`): name and
/// declared type.
pub fn table_columns_typed(conn: &rusqlite::Connection, table: &str) -> rusqlite::Result<Vec<(String, String)>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({})", quote(table)))?;
    let cols = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?.unwrap_or_default(),
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(cols)
}

/// The column names of `table` as the database declares them.
pub fn table_columns(conn: &rusqlite::Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    Ok(table_columns_typed(conn, table)?.into_iter().map(|(n, _)| n).collect())
}

/// Errors of the join step.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// SQLite failed (missing table, bad file, …).
    #[error("join step on {path}: {source}")]
    Sqlite {
        /// Database file.
        path: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The join description is inconsistent (unknown alias, no tables).
    #[error("join step: {0}")]
    Invalid(String),
}

/// The SQL the join step runs: every column of every table instance, renamed
/// `<prefix>_<column>`, joined in order with the given equality conditions. Conditions whose
/// `right` alias is the same are ANDed into one `ON` clause.
pub fn join_sql(
    conn: &rusqlite::Connection,
    tables: &[JoinTable],
    conditions: &[JoinCondition],
) -> Result<(String, Vec<String>), JoinError> {
    let first = tables.first().ok_or_else(|| JoinError::Invalid("no tables".into()))?;
    let mut select = Vec::new();
    let mut names = Vec::new();
    let mut seen = HashSet::new();
    for t in tables {
        let cols = table_columns(conn, &t.table).map_err(|source| JoinError::Sqlite {
            path: t.table.clone(),
            source,
        })?;
        if cols.is_empty() {
            return Err(JoinError::Invalid(format!(
                "no table named {:?} in the database",
                t.table
            )));
        }
        for c in cols {
            let name = safe_name(&t.prefix, &c);
            if !seen.insert(name.to_lowercase()) {
                continue;
            }
            select.push(format!("{}.{} AS {}", quote(&t.alias), quote(&c), quote(&name)));
            names.push(name);
        }
    }
    let mut sql = format!(
        "SELECT {} FROM {} AS {}",
        select.join(", "),
        quote(&first.table),
        quote(&first.alias)
    );
    for t in &tables[1..] {
        let on: Vec<&JoinCondition> = conditions
            .iter()
            .filter(|c| {
                c.1.split_once('.')
                    .is_some_and(|(a, _)| a.eq_ignore_ascii_case(&t.alias))
            })
            .collect();
        let kind = on.first().map_or("INNER", |c| c.2.as_str());
        let kind = if kind.eq_ignore_ascii_case("LEFT") {
            "LEFT"
        } else {
            "INNER"
        };
        sql.push_str(&format!(" {kind} JOIN {} AS {}", quote(&t.table), quote(&t.alias)));
        if !on.is_empty() {
            let conds: Vec<String> = on
                .iter()
                .map(|c| format!("{} = {}", quote_qualified(&c.0), quote_qualified(&c.1)))
                .collect();
            sql.push_str(&format!(" ON {}", conds.join(" AND ")));
        }
    }
    Ok((sql, names))
}

/// Checks that `path` holds a SQLite database before it is opened: at least one 100-byte header
/// starting with the magic string `"SQLite format 3\0"` (SQLite's file format, §1.3 "The Database
/// Header"). SQLite itself opens a 0-byte file as an empty database and reads any other file
/// lazily, so neither would be reported until a query fails. Errors: a readable sentence naming
/// what was found (`0 bytes`, `not a SQLite header`) or the I/O error.
pub fn check_sqlite_file(path: &Path) -> Result<(), String> {
    use std::io::Read;
    const MAGIC: &[u8; 16] = b"SQLite format 3\0";
    let mut f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    if len == 0 {
        return Err("the file is empty (0 bytes)".into());
    }
    let mut head = [0u8; 16];
    if len < 100 || f.read_exact(&mut head).is_err() || &head != MAGIC {
        return Err(format!("the file ({len} bytes) does not start with the SQLite header"));
    }
    Ok(())
}

/// Opens a database read-only (no file is created for a missing path).
pub fn open_read_only(path: &Path) -> rusqlite::Result<rusqlite::Connection> {
    rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
}

/// Runs `sql` and returns its rows as datums.
pub fn query_rows(conn: &rusqlite::Connection, sql: &str) -> rusqlite::Result<Vec<Vec<Datum>>> {
    let mut stmt = conn.prepare(sql)?;
    let n = stmt.column_count();
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(
            (0..n)
                .map(|i| datum_from_sqlite(row.get_ref(i).expect("column index")))
                .collect(),
        );
    }
    Ok(out)
}

/// The rows a join is expected to have: those of its first table (the fact table of a join along
/// foreign keys), 0 when they cannot be counted.
fn rows_hint(conn: &rusqlite::Connection, tables: &[JoinTable]) -> usize {
    let Some(first) = tables.first() else { return 0 };
    conn.query_row(&format!("SELECT count(*) FROM {}", quote(&first.table)), [], |r| {
        r.get::<_, i64>(0)
    })
    .map_or(0, |n| usize::try_from(n).unwrap_or(0))
}

/// The join step `initialize_active_data`: materialises the joined table as a record batch.
///
/// One materialised join is shared per (database file, join SQL) across the questions and
/// stages of a process ([`crate::tools::join_cache`]): the compile stage, the trajectories
/// emitter and the live server's sessions of one database and join read the same Arrow buffers.
pub fn initialize_active_data(
    conn: &rusqlite::Connection,
    tables: &[JoinTable],
    conditions: &[JoinCondition],
) -> Result<RecordBatch, JoinError> {
    let (sql, names) = join_sql(conn, tables, conditions)?;
    // An in-memory database (no path) is never shared.
    let key = conn
        .path()
        .filter(|p| !p.is_empty())
        .map(|p| super::join_cache::JoinKey::new(Path::new(p), &sql));
    super::join_cache::get_or_try_insert(key, |grown| {
        materialise::materialise(conn, &sql, &names, rows_hint(conn, tables), grown)
    })
}

/// The join step on the database file at `path`, shared like [`initialize_active_data`] but keyed
/// by the join's description (table instances with their prefixes, conditions) instead of its
/// SQL: a cached join is returned without opening the database, reading its schema or building
/// the SQL (on Spider those were most of a cache hit's cost, issue 17). On a miss the file is
/// opened read-only (this thread's connection to the same file version is reused,
/// [`reuse`]) and joined as [`initialize_active_data`] does (one cache entry, under this key).
/// Errors: `<path>: <SQLite error>` when the file does not open, else the [`JoinError`] text.
pub fn join_at(path: &Path, tables: &[JoinTable], conditions: &[JoinCondition]) -> Result<RecordBatch, String> {
    let description = format!("{tables:?}\u{1f}{conditions:?}");
    let key = super::join_cache::JoinKey::new(path, &description);
    super::join_cache::get_or_try_insert(Some(key), |grown| {
        reuse::with_connection(path, |conn| {
            let (sql, names) = join_sql(conn, tables, conditions).map_err(|e| e.to_string())?;
            materialise::materialise(conn, &sql, &names, rows_hint(conn, tables), grown).map_err(|e| e.to_string())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_names_follow_the_reference() {
        assert_eq!(safe_name("Player_Attributes", "date"), "Player_Attributes_date");
        assert_eq!(safe_name("t", "Height (cm)"), "t_Height_cm");
        assert_eq!(safe_name("t", "km/h-x"), "t_km_h_x");
    }

    #[test]
    fn join_step_columns_match_the_datum_typing_rule() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE t (mixed, ints, reals, nulls, late_text);
             INSERT INTO t VALUES (1, 1, 1, NULL, 1), (2.5, NULL, 2.5, NULL, 2.0),
               ('x', 3, 3, NULL, NULL), (NULL, 4, NULL, NULL, 'y'), (x'0aff', 5, 1e20, NULL, 0.1);",
        )
        .unwrap();
        let tables = vec![JoinTable {
            alias: "t".into(),
            table: "t".into(),
            prefix: "t".into(),
        }];
        let got = initialize_active_data(&conn, &tables, &[]).unwrap();
        let (sql, names) = join_sql(&conn, &tables, &[]).unwrap();
        let rows = query_rows(&conn, &sql).unwrap();
        let columns: Vec<Vec<Datum>> = (0..names.len())
            .map(|c| rows.iter().map(|r| r[c].clone()).collect())
            .collect();
        let want = batch_from_columns(&names, columns);
        assert_eq!(got.schema(), want.schema());
        for (g, w) in got.columns().iter().zip(want.columns()) {
            assert_eq!(datums(g.as_ref()), datums(w.as_ref()));
        }
    }

    #[test]
    fn a_cached_join_step_does_not_reopen_the_database() {
        let _cache = super::super::join_cache::exclusive();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sqlite");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (a); INSERT INTO t VALUES (1), (2);")
            .unwrap();
        drop(conn);
        let tables = vec![JoinTable {
            alias: "t".into(),
            table: "t".into(),
            prefix: "t".into(),
        }];
        assert_eq!(join_at(&path, &tables, &[]).unwrap().num_rows(), 2);
        // Same length and modification time, but no longer a database: a hit must not read it
        // (the old path opened it and read its schema on every join step).
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let modified = file.metadata().unwrap().modified().unwrap();
        let len = file.metadata().unwrap().len() as usize;
        std::io::Write::write_all(&mut &file, &vec![b'x'; len]).unwrap();
        file.set_modified(modified).unwrap();
        drop(file);
        assert_eq!(join_at(&path, &tables, &[]).unwrap().num_rows(), 2);
        assert!(initialize_active_data(&open_read_only(&path).unwrap(), &tables, &[]).is_err());
    }

    #[test]
    fn column_typing() {
        let a = array_from_datums(&[Datum::Int(1), Datum::Null]);
        assert_eq!(a.data_type(), &DataType::Int64);
        let a = array_from_datums(&[Datum::Int(1), Datum::Real(2.5)]);
        assert_eq!(a.data_type(), &DataType::Float64);
        let a = array_from_datums(&[Datum::Int(1), Datum::Text("x".into())]);
        assert_eq!(datums(a.as_ref()), vec![Datum::Int(1), Datum::Text("x".into())]);
        let a = array_from_datums(&[Datum::Null]);
        assert_eq!(a.data_type(), &DataType::Utf8);
    }
}
