//! A list of toolkits as a store entry holds it (issue 34: the merge reads every entry): each
//! distinct spec's compact JSON text once, and each toolkit as the indices of its specs.
//!
//! `{"specs": [spec…], "toolkits": [[index…]…]}`: `specs` are the distinct elements of the
//! toolkits' texts ([`Toolkit::json`]'s elements, as they stand in it) in first-use order; toolkit `i` is
//! `specs[toolkits[i][0]], specs[toolkits[i][1]], …`. Variant rows and the rows of one question
//! batch hold many toolkits that share most specs (a distractor set adds a few specs to the
//! question's own; a drifted toolkit renames a few), so each spec is written, hashed and checked
//! once: on Spider dev's slot-spider-variants the variants entries held 49 MB of toolkit text
//! over 6.4 MB of distinct specs. Reading checks every distinct spec ([`SpecText::parse`]) and
//! makes each toolkit of its shared texts ([`Toolkit::from_spec_texts`]); a toolkit's joined
//! text is made when asked for, its specs parsed only when read.
//!
//! A spec text is checked once per process ([`checked`]): the checked texts live in a registry
//! while any toolkit holds them, so the tables of many entries that list the same specs (the
//! tools a database's question batches share, the specs a unit's variant rows share with its
//! examples) share one check and one copy.
//!
//! Use as `#[serde(with = "crate::tools::spec_table")]` on a `Vec<Toolkit>` field.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use super::Toolkit;
use super::toolkit::SpecText;

/// The table as written.
#[derive(Serialize)]
struct Written<'a> {
    specs: Vec<&'a RawValue>,
    toolkits: Vec<Vec<u32>>,
}

/// The table as read (the specs owned: any deserializer, not only a borrowing one).
#[derive(Deserialize)]
struct Read {
    specs: Vec<Box<RawValue>>,
    toolkits: Vec<Vec<u32>>,
}

/// Writes `toolkits` as a table (module docs). Errors: a toolkit's text that is not a JSON array
/// (never: [`Toolkit::json`] writes one).
pub fn serialize<S: Serializer>(toolkits: &[Toolkit], s: S) -> Result<S::Ok, S::Error> {
    let mut index: HashMap<&str, u32> = HashMap::new();
    let mut specs: Vec<&RawValue> = Vec::new();
    let mut lists = Vec::with_capacity(toolkits.len());
    for t in toolkits {
        let parts: Vec<&RawValue> = serde_json::from_str(t.json()).map_err(S::Error::custom)?;
        let list = parts
            .into_iter()
            .map(|p| {
                *index.entry(p.get()).or_insert_with(|| {
                    specs.push(p);
                    specs.len() as u32 - 1
                })
            })
            .collect();
        lists.push(list);
    }
    Written { specs, toolkits: lists }.serialize(s)
}

/// Reads a table written by [`serialize`] into its toolkits, in order. Errors: a spec that is
/// not one ([`SpecText::parse`]), an index out of range.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Toolkit>, D::Error> {
    let read = Read::deserialize(d)?;
    let specs = read
        .specs
        .iter()
        .map(|raw| checked(raw.get()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(D::Error::custom)?;
    read.toolkits
        .iter()
        .map(|list| {
            let parts = list
                .iter()
                .map(|&i| {
                    specs
                        .get(i as usize)
                        .ok_or_else(|| D::Error::custom(format!("spec {i} of {}", specs.len())))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Toolkit::from_spec_texts(&parts))
        })
        .collect()
}

/// The checked spec of `text` ([`SpecText::parse`]), shared with every other holder of the same
/// text in this process: a text checked before and still held is not checked again. Errors: as
/// [`SpecText::parse`] (a refused text is not remembered).
pub fn checked(text: &str) -> Result<Arc<SpecText>, serde_json::Error> {
    /// Checked texts by their XXH3-128 digest (a hit is compared text to text), held weakly: a
    /// text no toolkit holds any more is dropped, and its entry swept when the registry has
    /// doubled since the last sweep.
    struct Registry {
        texts: HashMap<u128, Weak<SpecText>>,
        swept_at: usize,
    }
    static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);
    let digest = twox_hash::XxHash3_128::oneshot(text.as_bytes());
    let lookup = |registry: &Option<Registry>| {
        registry
            .as_ref()
            .and_then(|r| r.texts.get(&digest))
            .and_then(Weak::upgrade)
            .filter(|spec| spec.text() == text)
    };
    // A poisoned lock only means a thread panicked while holding it; the map is still whole.
    let lock = || REGISTRY.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(spec) = lookup(&lock()) {
        return Ok(spec);
    }
    // Checked outside the lock (entries are read in parallel).
    let spec = Arc::new(SpecText::parse(text)?);
    let mut guard = lock();
    let registry = guard.get_or_insert_with(|| Registry {
        texts: HashMap::new(),
        swept_at: 1024,
    });
    registry.texts.insert(digest, Arc::downgrade(&spec));
    if registry.texts.len() >= 2 * registry.swept_at {
        registry.texts.retain(|_, w| w.strong_count() > 0);
        registry.swept_at = registry.texts.len().max(1024);
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use crate::tools::{Toolkit, test_spec as spec};
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    struct Holder {
        #[serde(with = "super")]
        toolkits: Vec<Toolkit>,
    }

    #[test]
    fn toolkits_sharing_specs_store_each_spec_once_and_read_back_to_the_same_texts() {
        let mut reference = spec("r");
        reference.description = String::new();
        reference.parameters = serde_json::Value::Null;
        let toolkits: Vec<Toolkit> = vec![
            vec![spec("a"), spec("b")].into(),
            vec![spec("b"), spec("a"), spec("c")].into(),
            Vec::new().into(),
            vec![reference, spec("a")].into(),
        ];
        let text = serde_json::to_string(&Holder {
            toolkits: toolkits.clone(),
        })
        .unwrap();
        // Each distinct spec once (`"name":"a"` would be four times written whole).
        assert_eq!(text.matches("\"name\":\"a\"").count(), 1, "{text}");
        let back: Holder = serde_json::from_str(&text).unwrap();
        assert_eq!(back.toolkits.len(), toolkits.len());
        for (b, t) in back.toolkits.iter().zip(&toolkits) {
            // The same text as the toolkit's own, names and references read without parsing.
            assert_eq!(b.json(), t.json());
            // (An empty toolkit is the default one, whose empty list is there from the start.)
            assert!(!b.parsed() || t.is_empty());
            assert_eq!(b.names().collect::<Vec<_>>(), t.names().collect::<Vec<_>>());
            assert_eq!(b.has_references(), t.iter().any(crate::tools::ToolSpec::is_reference));
            // … and parsed on first read to the same specs.
            assert_eq!(&**b, &**t);
        }
        // Bad tables are refused: an index out of range, a spec that is not one.
        let out_of_range = text.replace("[0,1]", "[0,9]");
        assert!(serde_json::from_str::<Holder>(&out_of_range).is_err());
        let not_a_spec = r#"{"toolkits":{"specs":[{"description":"no name"}],"toolkits":[[0]]}}"#;
        assert!(serde_json::from_str::<Holder>(not_a_spec).is_err());
    }

    #[test]
    fn a_table_is_read_exactly_when_its_toolkits_parse_as_specs_even_at_the_nesting_limit() {
        // serde_json refuses JSON nested deeper than 128 levels. A spec is checked alone when
        // the table is read and parsed as an element of its toolkit's list when first read: the
        // two must agree at every depth (else a read table would panic on first use, not be
        // recomputed).
        for depth in 120..135 {
            let spec = format!(
                r#"{{"name":"a","parameters":{}{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            );
            let table = format!(r#"{{"toolkits":{{"specs":[{spec}],"toolkits":[[0]]}}}}"#);
            let list = serde_json::from_str::<Vec<crate::tools::ToolSpec>>(&format!("[{spec}]"));
            let read = serde_json::from_str::<Holder>(&table);
            assert_eq!(read.is_ok(), list.is_ok(), "depth {depth}");
            if let (Ok(read), Ok(list)) = (read, list) {
                assert_eq!(read.toolkits[0].as_slice(), list.as_slice(), "depth {depth}");
            }
        }
    }

    #[test]
    fn a_spec_text_is_checked_once_and_shared_while_held() {
        let text = r#"{"name":"shared_once","description":"d","parameters":{"type":"object"}}"#;
        let first = super::checked(text).unwrap();
        let again = super::checked(text).unwrap();
        assert!(std::sync::Arc::ptr_eq(&first, &again), "one check, one copy");
        assert_eq!(again.text(), text);
        // Another text is another spec; a refused text is refused every time.
        let other = super::checked(&text.replace("shared_once", "other_one")).unwrap();
        assert!(!std::sync::Arc::ptr_eq(&first, &other));
        let bad = r#"{"description":"no name"}"#;
        assert!(super::checked(bad).is_err());
        assert!(super::checked(bad).is_err());
    }
}
