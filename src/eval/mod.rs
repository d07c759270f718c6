//! `toolforge eval`: scores models on built datasets with the papers' metrics, and runs them.
//!
//! - [`rows`]: a built dataset as the evaluator reads it (setup step split off; both row shapes).
//! - [`predictions`]: the predictions file (our `output` format or OpenAI `tool_calls`), every
//!   problem counted and named, never fatal.
//! - [`metrics`]: one metric per function, with its paper § (Live API-Bench §4.1.1, API-BLEND
//!   §5.4, BFCL AST and irrelevance) or marked as ours (exact match).
//! - [`execute`]: completion (the predicted sequence executed, answer compared as verification
//!   compares) and the DynamicToolBench pass rate (A_new enforced as `serve` enforces it).
//! - [`score`]: per-row results, totals and breakdowns; [`stats`]: bootstrap 95% intervals;
//!   [`taxonomy`]: the error kinds of each row (wrong tool, wrong argument, bad reference, …).
//! - [`report`]: `eval/<run>/` files (`rows.jsonl`, `report.json`, `report.md`) and the
//!   Markdown tables; [`charts`]: SVG charts; [`compare`]: `eval report`, runs paired on their
//!   common rows (paired bootstrap, McNemar, BFCL's unweighted category mean); [`blocks`]: a
//!   document of headings, texts, lists and tables written as Markdown and as page data.
//! - [`run`]: a model through an OpenAI-compatible endpoint, *direct* or *agent*
//!   ([`agent`]: the tool-calling loop against the live tools; [`open_world`]: the agent given
//!   only `search_tools` and `call_tool`, and the retrieval metrics of its searches); [`prompt`]:
//!   what the model is shown and how its text is read back into calls.
//! - [`repeats`]: `eval run --repeats N`: the run N times with seeds S … S+N−1, then mean ± std
//!   per metric, pass@k of completion (Chen et al. 2021) and per-row agreement.
//! - [`retrieval`]: `eval retrieval`, Recall@k / nDCG@10 / MRR of BM25 or a TREC run on the BEIR
//!   retrieval datasets.
//!
//! This module sits above `emit`, `serve`, `variants`, `tools` and `llm`; nothing imports it but
//! `main.rs`.

pub mod agent;
pub mod blocks;
pub mod charts;
pub mod compare;
pub mod execute;
pub mod html;
pub mod metrics;
pub mod open_world;
pub mod predictions;
pub mod prompt;
pub mod repeats;
pub mod report;
pub mod retrieval;
pub mod rows;
pub mod run;
pub mod score;
pub mod stats;
pub mod taxonomy;
