//! The card emitter: `README.md`, a Hugging Face dataset card.
//!
//! Schema: a YAML header (`license` (SPDX-style id or `other`), `pretty_name`,
//! `task_categories`, `tags` (tool-calling, function-calling and the family tag),
//! `configs` (one Parquet data file per split), `dataset_info` (`features`: the row schema of
//! [`super::rows`], `splits` with `num_examples`)), then the description, the source (title,
//! homepage, license), the counts, the family paragraph (what `output` is and how it was checked),
//! the variants paragraph when the build has variant rows, and the source's BibTeX citation.

use std::fmt::Write as _;

use arrow_schema::DataType;

use super::report::{Counts, pct};
use super::rows::row_schema;
use crate::dataset::Build;

/// What the card says about a family's `output` and how it was checked.
fn family_paragraph(format: &str) -> &'static str {
    match format {
        "slot" => {
            "Each example's `output` is a sequence of SLOT tool calls (`initialize_active_data` first: the setup step that materialises the query's joins). Calls refer to earlier outputs as `$LABEL$`. The final answer is the zip of the outputs no later call refers to. Only examples whose calls, run by toolforge's own executor, reproduce the gold SQL result on SQLite are kept (rows compared as a multiset, or in order when the SQL has ORDER BY; 1 == 1.0; reals within 1e-9 relative); `gold_answer` is the SQL result."
        }
        "sel" => {
            "Each example's `output` is a sequence of SEL tool calls: the SLOT sequence with categorical arguments bound into function names (`select_data_equal_to`, `sort_data_descending`, `compute_data_count`, one `get_<column>` getter per column of the joined table), so every instance carries its own toolkit in `tools`. Verified like SLOT: the calls, executed on the real database, reproduce the gold SQL result; `gold_answer` is the SQL result."
        }
        "rest" => {
            "Each example's `output` is one call of a GET endpoint synthesised from the gold SQL: its literals became typed query parameters, and questions that differ only in literal values share an endpoint. `tools` holds the endpoints of the example's database; `tools/openapi.json` is the FastAPI-equivalent OpenAPI 3.1 document and `tools/endpoints.json` the parameterised SQL behind each endpoint (what `toolforge serve` runs with bound parameters). Kept only when the call reproduces the gold SQL result; `gold_answer` is that result."
        }
        "catalog" => {
            "Each row is a ToolGym task skeleton over one seeded tool bundle: `tools` is the bundle (OpenAI function format), `meta.reference_tools` names each tool's server and role, `output` is empty and `input` a template sentence until an LLM endpoint writes the task. The normalised catalog is in `tools/functions.json` and `tools/mcp.json`; every schema fix and rejected tool is in `report/`."
        }
        "bfcl" => {
            "Each row is a BFCL question with its functions in `tools` (BFCL types mapped to JSON Schema) and one gold call in `output` chosen from the acceptable values; `meta` keeps every acceptable value and the row's gold-lint findings (unknown parameters, enum violations, type mismatches)."
        }
        _ => {
            "Each example's `output` is the sequence of API calls annotated in the source, converted by the rules in `report/verification.json` (`stats`); every call validates against its tool's JSON Schema in `tools`. Calls refer to earlier outputs as `$LABEL$`."
        }
    }
}

/// The Hugging Face `license:` identifier of a manifest's license text: the SPDX-style id when
/// the text names a known license (`CC BY-SA 4.0` → `cc-by-sa-4.0`), else `other`.
fn hf_license(text: &str) -> String {
    let id: String = text
        .split([';', '(', ','])
        .next()
        .unwrap_or_default()
        .trim()
        .to_lowercase()
        .replace(' ', "-");
    let known = [
        "mit",
        "apache-2.0",
        "cc-by-4.0",
        "cc-by-sa-4.0",
        "cc-by-nc-4.0",
        "cc-by-nc-sa-4.0",
        "cc0-1.0",
        "bsd-3-clause",
        "gpl-3.0",
        "odc-by",
    ];
    match id.as_str() {
        "cc0" => "cc0-1.0".into(),
        _ if known.contains(&id.as_str()) => id,
        _ => "other".into(),
    }
}

/// The card text of a build.
pub(super) fn card(build: &Build, c: &Counts) -> String {
    let m = &build.source.manifest;
    let license = hf_license(&m.license);
    let mut s = String::new();
    let tag = match build.recipe.format.as_str() {
        "seq" => "api-sequences",
        "catalog" => "mcp",
        "bfcl" => "function-calling-evaluation",
        _ => "text-to-sql",
    };
    let _ = writeln!(
        s,
        "---\nlicense: {license}\npretty_name: {}\ntask_categories:\n- text-generation\ntags:\n- tool-calling\n- function-calling\n- {tag}\nconfigs:\n- config_name: default\n  data_files:",
        build.recipe.name
    );
    for split in c.per_split.keys() {
        let _ = writeln!(s, "  - split: {split}\n    path: data/{split}.parquet");
    }
    let _ = writeln!(s, "dataset_info:\n  features:");
    for f in row_schema().fields() {
        match f.data_type() {
            DataType::List(_) => {
                let _ = writeln!(
                    s,
                    "  - name: {}\n    list:\n    - name: name\n      dtype: string\n    - name: arguments\n      dtype: string\n    - name: label\n      dtype: string",
                    f.name()
                );
            }
            DataType::Boolean => {
                let _ = writeln!(s, "  - name: {}\n    dtype: bool", f.name());
            }
            _ => {
                let _ = writeln!(s, "  - name: {}\n    dtype: string", f.name());
            }
        }
    }
    let _ = writeln!(s, "  splits:");
    for (split, n) in &c.per_split {
        let _ = writeln!(s, "  - name: {split}\n    num_examples: {n}");
    }
    let _ = writeln!(s, "---\n");
    let _ = writeln!(s, "# {}\n\n{}\n", build.recipe.name, build.recipe.description);
    let _ = writeln!(
        s,
        "Built by toolforge {} from **{}** ({}, {}).\n",
        env!("CARGO_PKG_VERSION"),
        m.title,
        m.homepage,
        m.license
    );
    let _ = writeln!(
        s,
        "- items attempted: {}\n- examples kept: {} ({:.1}%)\n- skipped input records: {}\n",
        c.attempted,
        c.verified,
        pct(c.verified, c.attempted),
        build.bad_records.len()
    );
    let _ = writeln!(
        s,
        "{} Drops and their reasons are in `report/verification.json`.\n",
        family_paragraph(&build.recipe.format)
    );
    if let Some(v) = build.stats.get("variants") {
        let _ = writeln!(
            s,
            "Variant rows (`meta.variant_of` = parent id, `meta.variant_kind`, details in `meta.variant`): {}. Their `tools` are the specs each was generated against; for `drift`, `output` is the gold migrated to A_new and `tools/drift.json` holds A_old, A_new and the change log per tool (`toolforge serve` enforces A_new).\n",
            v["rows"]
        );
    }
    let _ = writeln!(s, "## Source citation\n\n```bibtex\n{}\n```", m.citation.trim());
    s
}
