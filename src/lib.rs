//! toolforge: a compiler for tool-calling datasets.
//!
//! Pipeline (see ARCHITECTURE.md): [`recipe`] + source → [`corpus`] (source readers) → one
//! compile family ([`sql`] for SLOT/SEL/REST, [`seq`], [`catalog`]) over [`tools`] (specs,
//! executor, endpoints) and [`verify`] → [`variants`] → [`emit`] (rows, tool files, trajectories,
//! report, card, manifest) → [`serve`] (HTTP and MCP). Rows and builds are [`dataset`] types;
//! every stage result is cached in the content-addressed [`store`]; [`pipeline`] wires the stages.
//! There is no import cycle between these modules (`tests/layout.rs`; the dependency order is in
//! ARCHITECTURE.md).

pub mod catalog;
pub mod corpus;
pub mod dataset;
pub mod emit;
pub mod eval;
pub mod llm;
pub mod mix;
pub mod pipeline;
pub mod progress;
pub mod recipe;
pub mod retrieval;
pub mod seq;
pub mod serve;
pub mod sql;
pub mod store;
pub mod tools;
pub mod variants;
pub mod verify;
