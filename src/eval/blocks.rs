//! A document as a list of blocks — headings, paragraphs, lists and tables — written both as
//! Markdown (`compare.md`, the tables of `report.md`) and as the data of an HTML page (`eval
//! report --html` renders each table as a `<table>`), so the two say the same thing.
//!
//! Markdown: blocks are separated by one blank line; a table is a GitHub pipe table whose
//! numeric columns are right-aligned (`---:`).

use serde::{Deserialize, Serialize};

/// One block of a document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Block {
    /// A heading, `level` 1–6.
    Heading {
        /// `#` count.
        level: u8,
        /// Its text.
        text: String,
    },
    /// A paragraph (Markdown inline syntax such as `code` kept as written).
    Text {
        /// Its text.
        text: String,
    },
    /// A bullet list.
    List {
        /// One text per item.
        items: Vec<String>,
    },
    /// A table.
    Table {
        /// Column headers.
        header: Vec<String>,
        /// Whether each column is numeric (right-aligned).
        numeric: Vec<bool>,
        /// Cells, row by row (as many as `header`).
        rows: Vec<Vec<String>>,
    },
}

impl Block {
    /// A paragraph.
    pub fn text(text: impl Into<String>) -> Block {
        Block::Text { text: text.into() }
    }

    /// A heading of `level`.
    pub fn heading(level: u8, text: impl Into<String>) -> Block {
        Block::Heading {
            level,
            text: text.into(),
        }
    }

    /// The block in Markdown, ending with a newline.
    pub fn markdown(&self) -> String {
        match self {
            Block::Heading { level, text } => format!("{} {text}\n", "#".repeat(usize::from(*level))),
            Block::Text { text } => format!("{text}\n"),
            Block::List { items } => items.iter().map(|i| format!("- {i}\n")).collect(),
            Block::Table { header, numeric, rows } => {
                let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
                let rule: String = numeric.iter().map(|n| if *n { "---:|" } else { "---|" }).collect();
                let mut out = line(header) + "|" + &rule + "\n";
                for r in rows {
                    out.push_str(&line(r));
                }
                out
            }
        }
    }
}

/// The blocks in Markdown, separated by blank lines.
pub fn markdown(blocks: &[Block]) -> String {
    blocks.iter().map(Block::markdown).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_write_the_markdown_the_reports_had() {
        let blocks = [
            Block::heading(2, "By database"),
            Block::text("Two runs."),
            Block::List {
                items: vec!["a: 3 rows".into(), "b: 3 rows".into()],
            },
            Block::Table {
                header: vec!["Model".into(), "Rows".into()],
                numeric: vec![false, true],
                rows: vec![vec!["m".into(), "3".into()]],
            },
        ];
        assert_eq!(
            markdown(&blocks),
            "## By database\n\nTwo runs.\n\n- a: 3 rows\n- b: 3 rows\n\n| Model | Rows |\n|---|---:|\n| m | 3 |\n"
        );
    }
}
