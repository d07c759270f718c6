//! The card emitter: `README.md`, a Hugging Face dataset card.
//!
//! Schema: a YAML header in the Hugging Face dataset-card metadata format (`license` (SPDX-style
//! id, or `other` with `license_name` and `license_link`), `language`, `size_categories`,
//! `pretty_name`, `task_categories`, `tags` (tool-calling, function-calling and the family tag),
//! `configs` (one Parquet data file per split), `dataset_info` (`features`: the row schema of
//! [`super::rows`]; `splits` with `num_bytes` (Arrow in-memory bytes) and `num_examples`;
//! `download_size` (Parquet bytes) and `dataset_size`)), then the description, the source (title,
//! homepage, license), the counts (every row, variant rows included), the family paragraph (what
//! `output` is and how it was checked), the variants paragraph when the build has variant rows, a
//! table describing every column, a table of drop reasons, and the source's BibTeX citation.
//! Families with trajectories (the executable ones and seq) also get `trajectories/README.md`
//! ([`trajectories_card`]); the others' cards say why they have none ([`no_trajectories`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use arrow_schema::{DataType, Field};

mod trajectories;

pub use trajectories::{
    DATASETS_3X_PARAGRAPH, OPENAI_FEATURES, TRAJECTORY_FEATURES, TrajectorySummary, no_trajectories, tokens,
};
pub(crate) use trajectories::{has_trajectories, trajectories_card};

use super::report::{Counts, pct};
use super::rows::row_schema;
use crate::dataset::Build;
use crate::recipe::ToolPool;

/// What the card says about a family's `output` and how it was checked.
fn family_paragraph(format: &str) -> &'static str {
    match format {
        "slot" => {
            "Each example's `output` is a sequence of SLOT tool calls; `initialization_step` is the setup call the framework runs before them (`initialize_active_data`, label `starting_table_var`: it materialises the query's joins and is not part of the tools given to a model); `additional_setup_steps` lists further setup calls of the same shape (labels `starting_table_var_2`, …) for the other tables a subquery or set operation reads, `[]` when none. Calls refer to earlier outputs as `$LABEL$`. The final answer is the zip of the outputs no later call refers to. Only examples whose calls, run by toolforge's own executor, reproduce the gold SQL result on SQLite are kept (rows compared as a multiset, or in order when the SQL has ORDER BY; 1 == 1.0; reals within 1e-9 relative); `gold_answer` is the SQL result."
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
            "Each example's `output` is the sequence of API calls annotated in the source, converted by the rules in `report/verification.json` (`stats`); every call validates against its tool's JSON Schema. `tools` is the dataset's API list (API-BLEND §5.7.2: SeqATIS/SeqSNIPS every intent of the corpus, SeqTopV2 every intent of the row's domain, SeqSGD every intent of the dialogue's services and of their domains' other services, SeqMultiWOZ every domain's tools), never only the gold tools, each with its full JSON Schema (the catalog's spec of that name, also in `tools/functions.json`, OpenAI function format). Calls refer to earlier outputs as `$LABEL$`."
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

/// Sizes of one split's data, for the card's `dataset_info`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SplitSize {
    /// Arrow in-memory bytes of the rows (the `num_bytes` of Hugging Face `datasets`).
    pub num_bytes: usize,
    /// Bytes of `data/<split>.parquet`.
    pub parquet_bytes: usize,
}

/// The Hugging Face `size_categories` bucket of a row count.
fn size_category(n: usize) -> &'static str {
    match n {
        0..1_000 => "n<1K",
        1_000..10_000 => "1K<n<10K",
        10_000..100_000 => "10K<n<100K",
        100_000..1_000_000 => "100K<n<1M",
        1_000_000..10_000_000 => "1M<n<10M",
        _ => "10M<n<100M",
    }
}

/// What a column holds (the card's column table).
fn column_description(name: &str) -> &'static str {
    match name {
        "id" => "Row id, `<dataset>/<n>` (variant rows add a suffix).",
        "dataset" => "The dataset (recipe) name.",
        "split" => "The split the row belongs to.",
        "db_id" => "The source database (text-to-SQL families), else null.",
        "input" => "The user request: the natural-language question or utterance.",
        "evidence" => "External knowledge given with the question (BIRD), else null.",
        "sql" => "The gold SQL the calls were verified against, else null.",
        "output" => {
            "The gold tool calls in order: `name`, `arguments` (JSON text), `label` (later calls refer to the output as `$label$`)."
        }
        "initialization_step" => {
            "The framework's setup call (SLOT/SEL join step, label `starting_table_var`), run before the model's calls; never shown to the model."
        }
        "additional_setup_steps" => {
            "Further setup calls (JSON text list, `[]` when none) the framework runs after `initialization_step`: one join step per further table a subquery or set operation reads, labelled `starting_table_var_2`, …; never shown to the model."
        }
        "gold_answer" => "The gold answer as JSON rows (the SQL result), else null.",
        "ordered" => "Whether `gold_answer` is compared in order (the SQL has ORDER BY).",
        "tools" => {
            "The tools available to this row (JSON text list of `{name, description, parameters, output_parameters}`, each tool's full JSON Schema; seq datasets: the dataset's API list)."
        }
        "key_values_and_descriptions" => "Argument values and column descriptions the calls use (JSON text).",
        "difficulty" => "The source's difficulty label, else null.",
        "meta" => "Family details as JSON text (endpoint, variant, lint findings, …), else null.",
        _ => "See the dataset's documentation.",
    }
}

/// One feature of `dataset_info.features` (Hugging Face YAML: `dtype`, `list`, `struct`).
fn feature_yaml(s: &mut String, f: &Field, indent: usize) {
    let pad = " ".repeat(indent);
    let _ = writeln!(s, "{pad}- name: {}", f.name());
    match f.data_type() {
        DataType::List(item) => match item.data_type() {
            DataType::Struct(fields) => {
                let _ = writeln!(s, "{pad}  list:");
                for c in fields {
                    feature_yaml(s, c, indent + 2);
                }
            }
            _ => {
                let _ = writeln!(s, "{pad}  sequence: string");
            }
        },
        DataType::Struct(fields) => {
            let _ = writeln!(s, "{pad}  struct:");
            for c in fields {
                feature_yaml(s, c, indent + 2);
            }
        }
        DataType::Boolean => {
            let _ = writeln!(s, "{pad}  dtype: bool");
        }
        _ => {
            let _ = writeln!(s, "{pad}  dtype: string");
        }
    }
}

/// The card text of a build; `sizes` has one entry per split; `trajectories` what the
/// trajectory files hold (`None`: the family writes none, and the card says why).
pub(super) fn card(
    build: &Build,
    c: &Counts,
    sizes: &BTreeMap<String, SplitSize>,
    trajectories: Option<&TrajectorySummary>,
) -> String {
    let m = &build.source.manifest;
    let license = hf_license(&m.license);
    let rows: usize = c.per_split.values().sum();
    let mut s = String::new();
    let tag = match build.recipe.format.as_str() {
        "seq" => "api-sequences",
        "catalog" => "mcp",
        "bfcl" => "function-calling-evaluation",
        _ => "text-to-sql",
    };
    let _ = writeln!(s, "---\nlicense: {license}");
    if license == "other" {
        // YAML-quoted: the license text may hold `:` or `#`.
        let _ = writeln!(
            s,
            "license_name: {}\nlicense_link: {}",
            serde_json::to_string(&license_slug(&m.license)).expect("string"),
            serde_json::to_string(&m.homepage).expect("string")
        );
    }
    let _ = writeln!(
        s,
        "language:\n- en\nsize_categories:\n- {}\npretty_name: {}\ntask_categories:\n- text-generation\ntags:\n- tool-calling\n- function-calling\n- {tag}\nconfigs:\n- config_name: default\n  data_files:",
        size_category(rows),
        build.recipe.name
    );
    for split in c.per_split.keys() {
        let _ = writeln!(s, "  - split: {split}\n    path: data/{split}.parquet");
    }
    let _ = writeln!(s, "dataset_info:\n  features:");
    for f in row_schema().fields() {
        feature_yaml(&mut s, f, 2);
    }
    let _ = writeln!(s, "  splits:");
    for (split, n) in &c.per_split {
        let bytes = sizes.get(split).copied().unwrap_or_default();
        let _ = writeln!(
            s,
            "  - name: {split}\n    num_bytes: {}\n    num_examples: {n}",
            bytes.num_bytes
        );
    }
    let _ = writeln!(
        s,
        "  download_size: {}\n  dataset_size: {}",
        sizes.values().map(|z| z.parquet_bytes).sum::<usize>(),
        sizes.values().map(|z| z.num_bytes).sum::<usize>()
    );
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
    let per_split: Vec<String> = c.per_split.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    let variants = rows - c.verified;
    let _ = writeln!(
        s,
        "- rows: {rows} ({})\n- items attempted: {}\n- examples kept: {} ({:.1}%){}\n- skipped input records: {}\n",
        per_split.join(", "),
        c.attempted,
        c.verified,
        pct(c.verified, c.attempted),
        if variants > 0 {
            format!("\n- variant rows (generated from kept examples): {variants}")
        } else {
            String::new()
        },
        build.bad_records.len()
    );
    let _ = writeln!(
        s,
        "{} Drops and their reasons are listed below and, row by row, in `report/verification.json`.\n",
        family_paragraph(&build.recipe.format)
    );
    if build.recipe.tool_pool == ToolPool::Reference {
        let _ = writeln!(
            s,
            "Tool pool: **reference** (`tool_pool = \"reference\"`). Only call sequences the Live API-Bench reference tools (IBM's `invocable_api_hub`: `filter_data`, `sort_data`, `retrieve_data`, `aggregate_data` after `initialize_active_data`) execute faithfully are kept, so the rows run in IBM's harness: no grouped aggregates, `calculate`, set operations, membership or `like` filters (`LIKE '%text%'` becomes `contains`; an OR whose branches share no row becomes `concatenate_data`), and no use of a column that the reference's CSV hand-off changes (numbers stored as text, missing-value spellings). The others are dropped as `outside_reference_pool`, the first call outside the pool named in `report/verification.json`.\n"
        );
        if build.recipe.format == "sel" {
            let _ = writeln!(
                s,
                "SEL under the reference pool uses the names of IBM's sequencing harness (`SqlSequencingDatasetBuilder`): getters `get_<column>s` (not English plurals) and `compute_data_<agg>` with a `distinct` argument (not `compute_data_<agg>_distinct`); each instance's `tools` lists only the reference pool's SEL tools (`src/tools/reference/decisions.rs`).\n"
            );
        }
    }
    if let Some(v) = build.stats.get("variants") {
        let _ = writeln!(
            s,
            "Variant rows (`meta.variant_of` = parent id, `meta.variant_kind`, details in `meta.variant`): {}. Their `tools` are the specs each was generated against; for `drift`, `output` is the gold migrated to A_new; SLOT/SEL draw A_new per instance (the row's `meta.variant` holds `tools_new` and the change log; `toolforge serve` enforces it in sessions opened for that row's id), REST per endpoint (`tools/drift.json` holds A_old, A_new and the change log; `serve` answers at the A_new path and method, `tools/openapi_new.json`). Variant rows have trajectories showing the variant's request, tools and calls.\n",
            v["rows"]
        );
    }
    match trajectories {
        Some(t) => {
            let _ = writeln!(s, "{}\n", trajectories::paragraph(build, t));
        }
        None => {
            if let Some(why) = no_trajectories(&build.recipe.format) {
                let _ = writeln!(s, "## Trajectories\n\n{why}\n");
            }
        }
    }
    if let Some(p) = super::dialogue::card_paragraph(build) {
        let _ = writeln!(s, "{p}");
    }
    let _ = writeln!(s, "## Columns\n\n| column | type | description |\n|---|---|---|");
    for f in row_schema().fields() {
        let ty = match f.data_type() {
            DataType::List(_) => "list of {name, arguments, label}",
            DataType::Struct(_) => "struct",
            DataType::Boolean => "bool",
            _ => "string",
        };
        let _ = writeln!(s, "| `{}` | {ty} | {} |", f.name(), column_description(f.name()));
    }
    let _ = writeln!(s, "\n## Dropped items by reason\n");
    if c.reasons.is_empty() {
        let _ = writeln!(s, "No item was dropped.\n");
    } else {
        let mut reasons: Vec<_> = c.reasons.iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let _ = writeln!(s, "| reason | items | share of attempted |\n|---|---:|---:|");
        for (r, n) in reasons {
            let _ = writeln!(s, "| `{r}` | {n} | {:.1}% |", pct(*n, c.attempted));
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## Source citation\n\n```bibtex\n{}\n```", m.citation.trim());
    s
}

/// The `license_name` of a non-SPDX license: its text lowercased, runs of other characters as `-`
/// (the Hub expects a slug, e.g. `ms-pl`, `other-research-only`).
fn license_slug(text: &str) -> String {
    let mut slug = String::new();
    for ch in text.to_lowercase().chars() {
        if ch.is_ascii_alphanumeric() {
            slug.push(ch);
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    slug.trim_end_matches('-').to_string()
}
