//! toolforge: a compiler for tool-calling datasets.
//!
//! Pipeline (see ARCHITECTURE.md): `recipe` + `source` → `corpus` (ingest) → `sql` (lower to
//! calls) → `verify` (execute calls with `tools::executor`, compare with the SQL result) →
//! `emit` (Parquet, JSONL, catalog, report, card, manifest), with every stage result cached in
//! the content-addressed `store`. `pipeline` wires the stages.

pub mod catalog;
pub mod corpus;
pub mod dataset;
pub mod emit;
pub mod eval;
pub mod llm;
pub mod mcp;
pub mod openapi;
pub mod pipeline;
pub mod progress;
pub mod recipe;
pub mod seq;
pub mod serve;
pub mod sql;
pub mod store;
pub mod tools;
pub mod trajectory;
pub mod variants;
pub mod verify;
