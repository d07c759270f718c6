//! The database schema the planner resolves names against: tables and their columns, looked up
//! case-insensitively (SQLite identifiers are case-insensitive; the reference's case-sensitive
//! matching loses whole Spider databases such as `flight_2`).

use std::collections::BTreeMap;

/// Tables of one database, keyed by lower-cased name.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    tables: BTreeMap<String, (String, Vec<String>)>,
    types: BTreeMap<(String, String), String>,
}

impl Schema {
    /// Reads every table's columns from an open SQLite connection.
    pub fn load(conn: &rusqlite::Connection) -> rusqlite::Result<Schema> {
        let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name")?;
        let names = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        let mut schema = Schema::default();
        for name in names {
            let cols = crate::tools::table::table_columns_typed(conn, &name)?;
            for (c, t) in &cols {
                schema.types.insert((name.to_lowercase(), c.to_lowercase()), t.clone());
            }
            schema.add(&name, cols.into_iter().map(|(c, _)| c).collect());
        }
        Ok(schema)
    }

    /// True when the database holds no table or view.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// Adds a table (used by tests and loaders).
    pub fn add(&mut self, table: &str, columns: Vec<String>) {
        self.tables.insert(table.to_lowercase(), (table.to_string(), columns));
    }

    /// The OpenAPI type of a column from its declared SQLite type affinity (`integer`, `number`,
    /// `string`).
    pub fn dtype(&self, table: &str, column: &str) -> &'static str {
        let t = self
            .types
            .get(&(table.to_lowercase(), column.to_lowercase()))
            .map(|t| t.to_uppercase())
            .unwrap_or_default();
        if t.contains("INT") {
            "integer"
        } else if ["REAL", "FLOA", "DOUB", "NUM", "DEC"].iter().any(|k| t.contains(k)) {
            "number"
        } else {
            "string"
        }
    }

    /// The first table (in name order) having a column of this name (case-insensitive), with
    /// both names as declared.
    pub fn find_column(&self, column: &str) -> Option<(&str, &str)> {
        self.tables.values().find_map(|(t, cols)| {
            cols.iter()
                .find(|c| c.eq_ignore_ascii_case(column))
                .map(|c| (t.as_str(), c.as_str()))
        })
    }

    /// The table's name as declared, and its columns, for a case-insensitive name.
    pub fn table(&self, name: &str) -> Option<(&str, &[String])> {
        self.tables
            .get(&name.to_lowercase())
            .map(|(n, c)| (n.as_str(), c.as_slice()))
    }
}
