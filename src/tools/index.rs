//! The BM25 index over a tool catalog (Okapi BM25, k1 = 1.2, b = 0.75, through the `bm25`
//! crate: its default tokenizer — Unicode word boundaries, English stop words removed, Snowball
//! stemming — and its embedder's term weights).
//!
//! A tool's document is its name split into words (`get_singer_name_by_country` → `get singer
//! name by country`, camelCase split the same way), its description, and every parameter's name
//! (split) and description, nested object properties included, and text `enum` values (a SEL
//! tool's `key_name` columns, a REST parameter's categories). Queries are split the same way,
//! so an identifier in a query matches its words.
//!
//! Scoring is the crate's `Scorer` formula (a tool's score is the sum, over the query's tokens in
//! order, of idf(token) × the tool's saturated term weight, idf = ln(1 + (N − df + 0.5) / (df +
//! 0.5))) evaluated term at a time over posting lists into one score per tool: the crate's
//! `Scorer` rescans each candidate's whole token list per query token (p99 73 ms at 10,000
//! tools), this is one pass over the query tokens' postings. A unit test checks the scores equal
//! the crate's `Scorer`'s.
//!
//! The index is rebuilt from the catalog whenever it is needed (`serve`, `eval retrieval`,
//! `toolforge index`) rather than stored: building it is one pass over the catalog (documents
//! tokenised once, in parallel; `just bench-retrieval` times 10,000 tools), less than reading a
//! stored copy would save, and the catalog files are already content-hashed in the dataset's
//! `MANIFEST.json`.
//!
//! Ranking is deterministic: f32 sums in query-token order, sorted by score descending, ties by
//! tool name, then catalog position.

use std::collections::HashMap;

use bm25::{DefaultTokenizer, Embedder, EmbedderBuilder, Tokenizer};
use rayon::prelude::*;
use serde_json::Value as Json;

use crate::tools::ToolSpec;

/// Tokens already produced by the default tokenizer, joined by single spaces: the embedder
/// splits them back without tokenising twice.
#[derive(Debug, Default, Clone, Copy)]
struct Pretokenized;

impl Tokenizer for Pretokenized {
    fn tokenize(&self, text: &str) -> Vec<String> {
        text.split(' ').filter(|t| !t.is_empty()).map(String::from).collect()
    }
}

/// A BM25 index over tools.
pub struct ToolIndex {
    tools: Vec<ToolSpec>,
    tokenizer: DefaultTokenizer,
    embedder: Embedder<u32, Pretokenized>,
    /// Token → (tool position, term weight), one entry per tool containing the token.
    postings: HashMap<u32, Vec<(u32, f32)>>,
}

/// One ranked tool: its position in [`ToolIndex::tools`] and its BM25 score (> 0).
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Position of the tool in the indexed catalog.
    pub index: usize,
    /// BM25 score (sum over the query's tokens of idf × saturated term frequency).
    pub score: f32,
}

/// `text` with identifiers split into words: every character that is not a letter or digit is a
/// space, and a lower-case letter or digit followed by an upper-case letter is split
/// (`getSingerName` → `get Singer Name`).
pub fn words(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut prev: Option<char> = None;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            out.push(' ');
            prev = None;
            continue;
        }
        if let Some(p) = prev
            && (p.is_lowercase() || p.is_ascii_digit())
            && c.is_uppercase()
        {
            out.push(' ');
        }
        out.push(c);
        prev = Some(c);
    }
    out
}

/// The parameter names, descriptions and text `enum` values of a JSON Schema, depth first in
/// property order (nested `properties` and array `items` included), appended to `out`.
fn schema_text(schema: &Json, out: &mut String, depth: usize) {
    if depth > 8 {
        return;
    }
    if let Some(props) = schema.get("properties").and_then(Json::as_object) {
        for (name, p) in props {
            out.push(' ');
            out.push_str(&words(name));
            if let Some(d) = p.get("description").and_then(Json::as_str) {
                out.push(' ');
                out.push_str(d);
            }
            schema_text(p, out, depth + 1);
        }
    }
    if let Some(values) = schema.get("enum").and_then(Json::as_array) {
        for v in values.iter().filter_map(Json::as_str) {
            out.push(' ');
            out.push_str(&words(v));
        }
    }
    if let Some(items) = schema.get("items") {
        schema_text(items, out, depth + 1);
    }
}

/// The text a tool is indexed by: name (split into words), description, parameter names (split)
/// and descriptions.
pub fn document(tool: &ToolSpec) -> String {
    let mut text = words(&tool.name);
    text.push(' ');
    text.push_str(&tool.description);
    schema_text(&tool.parameters, &mut text, 0);
    text
}

impl ToolIndex {
    /// Indexes `tools` (their order is kept: [`Hit::index`] points into it). The average
    /// document length is fitted to these tools.
    pub fn build(tools: Vec<ToolSpec>) -> ToolIndex {
        let tokenizer = DefaultTokenizer::default();
        let docs: Vec<String> = tools
            .par_iter()
            .map(|t| tokenizer.tokenize(&document(t)).join(" "))
            .collect();
        let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
        let embedder: Embedder<u32, Pretokenized> =
            EmbedderBuilder::with_tokenizer_and_fit_to_corpus(Pretokenized, &refs).build();
        let mut postings: HashMap<u32, Vec<(u32, f32)>> = HashMap::new();
        for (i, d) in docs.iter().enumerate() {
            let embedding = embedder.embed(d);
            let mut seen = std::collections::HashSet::new();
            // A repeated token carries the same weight at each occurrence; the first is kept.
            for t in embedding.0.iter().filter(|t| seen.insert(t.index)) {
                postings.entry(t.index).or_default().push((i as u32, t.value));
            }
        }
        ToolIndex {
            tools,
            tokenizer,
            embedder,
            postings,
        }
    }

    /// The indexed tools, in catalog order.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// The tokens of `text` as the index sees them (identifiers split into words, stop words
    /// removed, stemmed): what a query or a tool's [`document`] is scored by.
    pub fn tokens(&self, text: &str) -> Vec<String> {
        self.tokenizer.tokenize(&words(text))
    }

    /// Every tool's BM25 score for `query`, in catalog order (0 for a tool sharing no token
    /// with it); [`ToolIndex::search`] ranks these.
    pub fn scores(&self, query: &str) -> Vec<f32> {
        self.scores_of_tokens(&self.tokens(query))
    }

    /// Every tool's BM25 score for a query already split into index tokens
    /// ([`ToolIndex::tokens`]), in catalog order: the variants stage's distractors score the
    /// gold tools' tokens this way, without the tokens every domain shares.
    pub fn scores_of_tokens(&self, tokens: &[String]) -> Vec<f32> {
        let q = self.embedder.embed(&tokens.join(" "));
        let n = self.tools.len() as f32;
        let mut acc = vec![0f32; self.tools.len()];
        for token in q.indices() {
            let Some(list) = self.postings.get(token) else { continue };
            let df = list.len() as f32;
            let idf = (1f32 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(doc, weight) in list {
                acc[doc as usize] += idf * weight;
            }
        }
        acc
    }

    /// The `k` best tools for `query` (fewer when fewer share a token with it), best first; ties
    /// by tool name, then catalog position.
    pub fn search(&self, query: &str, k: usize) -> Vec<Hit> {
        let mut hits: Vec<Hit> = self
            .scores(query)
            .into_iter()
            .enumerate()
            .filter(|(_, s)| *s > 0.0)
            .map(|(index, score)| Hit { index, score })
            .collect();
        let order = |a: &Hit, b: &Hit| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| self.tools[a.index].name.cmp(&self.tools[b.index].name))
                .then(a.index.cmp(&b.index))
        };
        if hits.len() > k && k > 0 {
            hits.select_nth_unstable_by(k - 1, order);
        }
        hits.truncate(k);
        hits.sort_by(order);
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str, parameters: Json) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
            output_parameters: json!({}),
        }
    }

    #[test]
    fn identifiers_split_into_words_snake_camel_and_digits() {
        assert_eq!(
            words("get_singer_name_by_country")
                .split_whitespace()
                .collect::<Vec<_>>(),
            ["get", "singer", "name", "by", "country"]
        );
        assert_eq!(
            words("getSingerName2Way").split_whitespace().collect::<Vec<_>>(),
            ["get", "Singer", "Name2", "Way"]
        );
        assert_eq!(
            words("HTTPServer-v2.list").split_whitespace().collect::<Vec<_>>(),
            ["HTTPServer", "v2", "list"]
        );
    }

    #[test]
    fn document_reads_name_description_and_nested_parameters() {
        let t = tool(
            "get_weather",
            "Current weather.",
            json!({"type": "object", "properties": {
                "cityName": {"type": "string", "description": "The city."},
                "opts": {"type": "object", "properties": {"unitSystem": {"type": "string", "description": "metric or imperial"}}}
            }}),
        );
        let d = document(&t);
        for w in [
            "get weather",
            "Current weather.",
            "city Name",
            "The city.",
            "unit System",
            "metric or imperial",
        ] {
            assert!(d.contains(w), "{w:?} missing from {d:?}");
        }
    }

    #[test]
    fn a_query_naming_a_tool_in_words_ranks_it_first() {
        let idx = ToolIndex::build(vec![
            tool(
                "get_singer_name_by_country",
                "Names of singers from a country.",
                json!({}),
            ),
            tool("get_concert_count", "Number of concerts.", json!({})),
            tool("list_stadiums", "Every stadium with its capacity.", json!({})),
        ]);
        let hits = idx.search("Which singers come from France? Give their names.", 3);
        assert_eq!(hits[0].index, 0);
        assert!(hits.iter().all(|h| h.score > 0.0));
        assert!(idx.search("zzzz qqqq", 5).is_empty());
    }

    #[test]
    fn scores_equal_the_bm25_crates_scorer() {
        let tools = vec![
            tool(
                "get_singer_name_by_country",
                "Names of singers from a country; singers sing.",
                json!({}),
            ),
            tool("get_concert_count", "Number of concerts held in a stadium.", json!({})),
            tool(
                "list_stadiums",
                "Every stadium with its capacity and its concerts.",
                json!({}),
            ),
            tool("count_singers", "How many singers there are.", json!({})),
        ];
        let idx = ToolIndex::build(tools.clone());
        let mut scorer = bm25::Scorer::<u32, u32>::new();
        for (i, t) in tools.iter().enumerate() {
            let doc = idx.tokenizer.tokenize(&document(t)).join(" ");
            scorer.upsert(&(i as u32), idx.embedder.embed(&doc));
        }
        for query in [
            "singers from France",
            "how many concerts in each stadium stadium",
            "capacity",
        ] {
            let q = idx.embedder.embed(&idx.tokenizer.tokenize(&words(query)).join(" "));
            let ours = idx.scores(query);
            for (i, s) in ours.iter().enumerate() {
                let theirs = scorer.score(&(i as u32), &q).unwrap();
                assert_eq!(*s, theirs, "{query:?}, tool {i}");
            }
        }
    }

    #[test]
    fn tied_scores_rank_by_tool_name_whatever_the_catalog_order() {
        let a = tool("tool_q", "same words here", json!({}));
        let b = tool("tool_p", "same words here", json!({}));
        let forward = ToolIndex::build(vec![a.clone(), b.clone()]);
        let backward = ToolIndex::build(vec![b, a]);
        let names = |idx: &ToolIndex| {
            idx.search("same words", 2)
                .iter()
                .map(|h| idx.tools()[h.index].name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&forward), ["tool_p", "tool_q"]);
        assert_eq!(names(&backward), ["tool_p", "tool_q"]);
    }
}
