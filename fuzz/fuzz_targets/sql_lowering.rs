//! SQL text in → parse → plan → SLOT calls (and their SEL binding) or a named reason out, then
//! the calls executed on the real database; plus the REST parameterisation. Over three Spider
//! schemas of different shapes. Any panic is a finding; errors are the expected outcome.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toolforge::corpus::descriptions::Descriptions;
use toolforge::sql::{self, schema::Schema};
use toolforge::tools::{executor::Executor, sel, table};

struct Db {
    schema: Schema,
    relative_path: String,
}

fn databases() -> &'static (PathBuf, Vec<Db>) {
    static DBS: OnceLock<(PathBuf, Vec<Db>)> = OnceLock::new();
    DBS.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpora/spider/database");
        let dbs = ["concert_singer", "world_1", "car_1"]
            .iter()
            .map(|db| {
                let relative_path = format!("{db}/{db}.sqlite");
                let conn = table::open_read_only(&root.join(&relative_path)).expect("spider database");
                Db {
                    schema: Schema::load(&conn).expect("schema"),
                    relative_path,
                }
            })
            .collect();
        (root, dbs)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(statement) = sql::parse(text) else {
        return;
    };
    let (root, dbs) = databases();
    let executor = Executor::new(root);
    for db in dbs {
        if let Ok(plan) = sql::plan::build(&statement, &db.schema) {
            if let Ok(lowered) = sql::slot::lower(&plan, &db.relative_path) {
                let _ = sel::bind(&lowered.calls);
                let _ = executor.run_with_setup(Some(&lowered.setup), &lowered.calls);
            }
        }
        let _ = sql::rest::parameterise(&statement, &db.schema, &Descriptions::default());
    }
});
