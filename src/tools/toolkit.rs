//! A row's toolkit ([`Toolkit`]): its tool specs, shared by the rows that hold the same list,
//! with their compact JSON text computed once; a toolkit read from a store entry (made of the
//! entry's spec texts, [`Toolkit::from_spec_texts`], or of a list's text, [`Toolkit::from_json`])
//! keeps that text and parses its specs only when they are read (issue 34: a merge reads every
//! compile item and, for most toolkits, never their specs).

use std::sync::{Arc, OnceLock};

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::ToolSpec;

/// A row's toolkit: its tool specs, shared. Rows whose toolkits are the same list (the SLOT/SEL
/// rows of one join signature, 61 SEL specs each) hold one allocation, so cloning a row or its
/// toolkit copies a pointer and the emitters serialise a toolkit once ([`Toolkit::id`] is the
/// memo key). Serialised exactly as the list of specs (a JSON array); reads (`iter`, `len`,
/// indexing) go through `Deref` to the `Vec`, and a write (`push`, `tools[0].name = …`) copies
/// the list first when it is shared (`Arc::make_mut`), so no other row sees it.
///
/// A toolkit's compact JSON text is computed once per shared list, by whichever of the store
/// entry, the trajectories key and the rows emitter asks first ([`Toolkit::json`]); a write clears
/// it. A toolkit made from that text ([`Toolkit::from_json`]) or from its specs' texts
/// ([`Toolkit::from_spec_texts`], what a store entry's decode gives) holds the text(s) and its
/// tool names only; the specs are parsed on the first read through `Deref`, once per shared list
/// (thread-safe), and [`Toolkit::json`] is the text itself (the spec texts joined).
/// [`Toolkit::names`] reads the names without parsing the specs.
#[derive(Debug, Clone, Default)]
pub struct Toolkit(Arc<Specs>);

/// A toolkit's contents: the specs, their text, their spec texts, or several (never none).
#[derive(Debug, Clone)]
struct Specs {
    /// The specs; unset while a toolkit made from text has not been read.
    list: OnceLock<Vec<ToolSpec>>,
    /// The specs as compact JSON; set from the start for a toolkit made from text, joined from
    /// `parts` on the first call for one made from spec texts.
    json: OnceLock<Arc<str>>,
    /// The checked spec texts of a toolkit made from text ([`Toolkit::from_spec_texts`],
    /// shared with the other toolkits of the same store entry; [`Toolkit::from_json`]): its
    /// names without parsing the specs. Empty for a toolkit made from specs.
    parts: Box<[Arc<SpecText>]>,
    /// Whether a toolkit made from text holds a [`ToolSpec::reference`] (read by its shape
    /// check); false for a toolkit made from specs.
    references: bool,
}

impl Default for Specs {
    fn default() -> Specs {
        Specs {
            list: OnceLock::from(Vec::new()),
            json: OnceLock::new(),
            parts: Box::default(),
            references: false,
        }
    }
}

impl Specs {
    /// The specs, parsed from the text on the first call when the toolkit was made from text.
    fn list(&self) -> &Vec<ToolSpec> {
        self.list.get_or_init(|| {
            let text = self.json();
            // `SpecText::parse` accepted each element of the text by the same rules as this
            // parse (`Toolkit::from_json`, `Toolkit::from_spec_texts`).
            serde_json::from_str(text).expect("a toolkit's text passed its shape check")
        })
    }

    /// The compact JSON text: the text a toolkit was made from, its spec texts joined as a JSON
    /// array, or its specs serialised — once.
    fn json(&self) -> &Arc<str> {
        self.json.get_or_init(|| {
            if self.parts.is_empty() {
                return serde_json::to_string(self.list()).expect("serialisable").into();
            }
            let len = 2 + self.parts.iter().map(|s| s.text.len() + 1).sum::<usize>();
            let mut text = String::with_capacity(len);
            text.push('[');
            for (i, s) in self.parts.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                text.push_str(&s.text);
            }
            text.push(']');
            text.into()
        })
    }
}

impl PartialEq for Toolkit {
    /// Equal specs. Two toolkits sharing a list, or with byte-equal JSON texts, are equal
    /// without parsing (the text is a function of the specs and parses back to them); otherwise
    /// the specs are compared.
    fn eq(&self, other: &Toolkit) -> bool {
        if Arc::ptr_eq(&self.0, &other.0) {
            return true;
        }
        if let (Some(a), Some(b)) = (self.0.json.get(), other.0.json.get()) {
            if a == b {
                return true;
            }
        }
        let (a, b) = (&self.0.parts, &other.0.parts);
        if !a.is_empty() && a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.text == y.text) {
            return true;
        }
        self.0.list() == other.0.list()
    }
}

impl Toolkit {
    /// The address of the shared list: equal for two toolkits that share it (then their specs are
    /// equal); a memo key valid while either toolkit is alive.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// The specs as compact JSON (what `serde_json::to_string` gives), computed once per shared
    /// list; for a toolkit made from text, that text.
    pub fn json(&self) -> &Arc<str> {
        self.0.json()
    }

    /// A toolkit of `text`, the compact JSON of a list of specs as [`Toolkit::json`] writes it (a
    /// store entry's), its specs parsed on their first read. The text is checked now, by the
    /// same rules as parsing it into specs (a JSON array of spec objects: a string `name`, an
    /// optional string `description`, any JSON `parameters` and `output_parameters`), without
    /// building them; the names are kept. Errors: the text is not such a list.
    pub fn from_json(text: Arc<str>) -> Result<Toolkit, serde_json::Error> {
        // Each element checked as `SpecText::parse` checks it: as an element of a list.
        let elements: Vec<&serde_json::value::RawValue> = serde_json::from_str(&text)?;
        let parts: Box<[Arc<SpecText>]> = elements
            .into_iter()
            .map(|e| SpecText::parse(e.get()).map(Arc::new))
            .collect::<Result<_, _>>()?;
        Ok(Toolkit(Arc::new(Specs {
            list: OnceLock::new(),
            json: OnceLock::from(text),
            references: parts.iter().any(|s| s.reference),
            parts,
        })))
    }

    /// A toolkit of `specs` in order, made from their texts as [`Toolkit::from_json`] makes one
    /// from a list's text (specs parsed on the first read): its text is theirs joined as a JSON
    /// array, `[a,b,…]`, which is [`Toolkit::json`] of the same specs when each text is its spec's
    /// compact JSON (an element of a toolkit's text). Each text was checked by [`SpecText::parse`], so
    /// the list passes the same check. The texts are shared, not copied: the joined text is made
    /// on the first call of [`Toolkit::json`] (a merge never asks for most).
    pub fn from_spec_texts(specs: &[&Arc<SpecText>]) -> Toolkit {
        if specs.is_empty() {
            return Toolkit::default();
        }
        Toolkit(Arc::new(Specs {
            list: OnceLock::new(),
            json: OnceLock::new(),
            parts: specs.iter().map(|s| Arc::clone(s)).collect(),
            references: specs.iter().any(|s| s.reference),
        }))
    }

    /// The tool names, in order, read without parsing the specs of a toolkit made from text.
    pub fn names(&self) -> Names<'_> {
        match self.0.list.get() {
            Some(list) => Names::Specs(list.iter()),
            None => Names::Parts(self.0.parts.iter()),
        }
    }

    /// Whether a spec is a [`ToolSpec::reference`] (`description` empty, `parameters` null),
    /// read without parsing the specs of a toolkit made from text.
    pub fn has_references(&self) -> bool {
        match self.0.list.get() {
            Some(list) => list.iter().any(ToolSpec::is_reference),
            None => self.0.references,
        }
    }

    /// Whether the specs are in memory: always for a toolkit made from specs; for one made from
    /// text ([`Toolkit::from_json`]), once they have been read.
    pub fn parsed(&self) -> bool {
        self.0.list.get().is_some()
    }
}

/// The tool names of a toolkit ([`Toolkit::names`]).
pub enum Names<'a> {
    /// Read from the specs.
    Specs(std::slice::Iter<'a, ToolSpec>),
    /// Read from a toolkit made from text (its spec texts), its specs not parsed.
    Parts(std::slice::Iter<'a, Arc<SpecText>>),
}

impl<'a> Iterator for Names<'a> {
    type Item = &'a str;
    fn next(&mut self) -> Option<&'a str> {
        match self {
            Names::Specs(it) => it.next().map(|t| t.name.as_str()),
            Names::Parts(it) => it.next().map(|p| &*p.name),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Names::Specs(it) => it.size_hint(),
            Names::Parts(it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for Names<'_> {}

impl From<Vec<ToolSpec>> for Toolkit {
    fn from(list: Vec<ToolSpec>) -> Toolkit {
        Toolkit(Arc::new(Specs {
            list: OnceLock::from(list),
            ..Specs::default()
        }))
    }
}

impl FromIterator<ToolSpec> for Toolkit {
    fn from_iter<I: IntoIterator<Item = ToolSpec>>(iter: I) -> Toolkit {
        Toolkit::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl std::ops::Deref for Toolkit {
    type Target = Vec<ToolSpec>;
    fn deref(&self) -> &Vec<ToolSpec> {
        self.0.list()
    }
}

impl std::ops::DerefMut for Toolkit {
    fn deref_mut(&mut self) -> &mut Vec<ToolSpec> {
        // Parsed in the shared list, so that the copy made for this write copies the specs
        // (rows sharing a toolkit read from text parse it once, not once per written copy).
        self.0.list();
        let specs = Arc::make_mut(&mut self.0);
        specs.json = OnceLock::new();
        specs.parts = Box::default();
        specs.references = false;
        specs.list.get_mut().expect("parsed just now")
    }
}

impl<'a> IntoIterator for &'a Toolkit {
    type Item = &'a ToolSpec;
    type IntoIter = std::slice::Iter<'a, ToolSpec>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.list().iter()
    }
}

impl Serialize for Toolkit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.list().as_slice().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Toolkit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Toolkit, D::Error> {
        Vec::<ToolSpec>::deserialize(d).map(Toolkit::from)
    }
}

/// One spec's JSON text, checked by the rules [`Toolkit::from_json`] checks each element of a
/// list by, with what a toolkit keeps of it without building it: its name and whether it is a
/// [`ToolSpec::reference`] ([`Toolkit::from_spec_texts`]).
#[derive(Debug, Clone)]
pub struct SpecText {
    text: Box<str>,
    name: Box<str>,
    reference: bool,
}

impl SpecText {
    /// `text` checked as one spec. Errors: it is not a spec object (or array) as
    /// [`ToolSpec`]'s deserialisation accepts it as an element of a list (checked as `[text]`:
    /// serde_json's nesting limit of 128 counts the list's level too, so a spec nested to the
    /// limit alone would pass and its toolkit's list then fail to parse).
    pub fn parse(text: &str) -> Result<SpecText, serde_json::Error> {
        let mut list = String::with_capacity(text.len() + 2);
        list.push('[');
        list.push_str(text);
        list.push(']');
        let [shape]: [SpecShape; 1] = serde_json::from_str(&list)?;
        Ok(SpecText {
            text: text.into(),
            reference: shape.description.empty && shape.parameters.null,
            name: shape.name.into_boxed_str(),
        })
    }

    /// The spec's JSON text, as checked.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// A [`ToolSpec`] checked without being built: the same fields in the same order, each accepting
/// exactly what the spec's field accepts (a struct as a JSON object or array, unknown keys
/// ignored, a repeated key refused), only the name and what makes a reference kept.
#[derive(Deserialize)]
struct SpecShape {
    name: String,
    #[serde(default)]
    description: StrShape,
    #[serde(default)]
    parameters: ValueShape,
    #[serde(default)]
    #[allow(dead_code)]
    output_parameters: ValueShape,
}

/// A JSON string (what a `String` field accepts), only whether it is empty kept (absent: empty).
struct StrShape {
    empty: bool,
}

impl Default for StrShape {
    fn default() -> StrShape {
        StrShape { empty: true }
    }
}

impl<'de> Deserialize<'de> for StrShape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<StrShape, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = StrShape;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<StrShape, E> {
                Ok(StrShape { empty: s.is_empty() })
            }
        }
        d.deserialize_str(V)
    }
}

/// Any JSON value (what a `serde_json::Value` field accepts: read through `deserialize_any` as
/// `Value` is, so numbers are range-checked and nesting depth-limited alike), only whether it is
/// null kept (absent: null).
struct ValueShape {
    null: bool,
}

impl Default for ValueShape {
    fn default() -> ValueShape {
        ValueShape { null: true }
    }
}

const NOT_NULL: ValueShape = ValueShape { null: false };

impl<'de> Deserialize<'de> for ValueShape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ValueShape, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ValueShape;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any valid JSON value")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<ValueShape, E> {
                Ok(NOT_NULL)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<ValueShape, E> {
                Ok(NOT_NULL)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<ValueShape, E> {
                Ok(NOT_NULL)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<ValueShape, E> {
                Ok(NOT_NULL)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<ValueShape, E> {
                Ok(NOT_NULL)
            }
            fn visit_unit<E: de::Error>(self) -> Result<ValueShape, E> {
                Ok(ValueShape { null: true })
            }
            fn visit_none<E: de::Error>(self) -> Result<ValueShape, E> {
                Ok(ValueShape { null: true })
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<ValueShape, D::Error> {
                ValueShape::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ValueShape, A::Error> {
                while seq.next_element::<ValueShape>()?.is_some() {}
                Ok(NOT_NULL)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ValueShape, A::Error> {
                while map.next_key::<IgnoredAny>()?.is_some() {
                    map.next_value::<ValueShape>()?;
                }
                Ok(NOT_NULL)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_spec as spec;

    #[test]
    fn a_cloned_toolkit_shares_its_specs_and_a_write_copies_them() {
        let a = Toolkit::from(vec![spec("get_a"), spec("get_b")]);
        let mut b = a.clone();
        assert_eq!(a.id(), b.id(), "a clone shares the list");
        b[0].name = "get_c".into();
        assert_ne!(a.id(), b.id(), "a write copies a shared list");
        assert_eq!(a[0].name, "get_a", "the other row's toolkit is untouched");
        assert_eq!(b[0].name, "get_c");
    }

    #[test]
    fn a_toolkit_serialises_as_the_list_of_its_specs() {
        let specs = vec![spec("get_a"), spec("get_b")];
        let text = serde_json::to_string(&Toolkit::from(specs.clone())).unwrap();
        assert_eq!(text, serde_json::to_string(&specs).unwrap());
        let back: Toolkit = serde_json::from_str(&text).unwrap();
        assert_eq!(back.as_slice(), specs.as_slice());
    }

    #[test]
    fn a_toolkit_json_is_its_serialisation_shared_and_a_write_renews_it() {
        let a = Toolkit::from(vec![spec("get_a")]);
        let shared = a.clone();
        assert_eq!(&**a.json(), serde_json::to_string(&a).unwrap());
        assert!(Arc::ptr_eq(a.json(), shared.json()), "computed once per shared list");
        let mut written = shared.clone();
        written.push(spec("get_b"));
        assert_eq!(&**written.json(), serde_json::to_string(&written).unwrap());
        assert_eq!(
            &**a.json(),
            serde_json::to_string(&a).unwrap(),
            "the other rows keep theirs"
        );
    }

    /// Specs whose fields use every kind of JSON value, escapes and non-ASCII text.
    fn varied_specs() -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: "get_caf\u{e9}_\"x\"".into(),
                description: "line\nbreak, tab\t, quote \" and é".into(),
                parameters: serde_json::json!({"type": "object", "properties": {"k": {"type": "number",
                    "minimum": -1.5e-7, "maximum": 18446744073709551615u64, "enum": [1, 2.25, null, true]}},
                    "required": ["k"]}),
                output_parameters: serde_json::json!({"type": "array", "items": {}}),
            },
            ToolSpec::reference("filter_data"),
            spec("get_b"),
        ]
    }

    #[test]
    fn a_toolkit_made_from_its_json_parses_on_first_read_to_the_same_specs_and_text() {
        let specs = varied_specs();
        let text: Arc<str> = serde_json::to_string(&specs).unwrap().into();
        let lazy = Toolkit::from_json(text.clone()).unwrap();
        let shared = lazy.clone();
        assert!(!lazy.parsed());
        assert_eq!(
            lazy.names().collect::<Vec<_>>(),
            ["get_caf\u{e9}_\"x\"", "filter_data", "get_b"]
        );
        assert_eq!(lazy.names().len(), 3);
        assert!(lazy.has_references(), "holds a reference");
        assert!(Arc::ptr_eq(lazy.json(), &text), "json() is the text it was made from");
        let eager = Toolkit::from(specs.clone());
        assert_eq!(
            eager.json().as_bytes(),
            lazy.json().as_bytes(),
            "the text is byte-equal to the specs' serialisation"
        );
        assert!(!lazy.parsed(), "names and json do not parse");
        assert_eq!(lazy.as_slice(), specs.as_slice());
        assert!(lazy.parsed() && shared.parsed(), "parsed once for the shared list");
        assert_eq!(lazy.names().collect::<Vec<_>>(), eager.names().collect::<Vec<_>>());
        assert_eq!(serde_json::to_string(&lazy).unwrap(), *text);
    }

    #[test]
    fn lazy_toolkits_compare_by_specs_and_a_write_copies_and_renews_the_text() {
        let text: Arc<str> = serde_json::to_string(&varied_specs()).unwrap().into();
        let (a, b) = (
            Toolkit::from_json(text.clone()).unwrap(),
            Toolkit::from_json(text.to_string().into()).unwrap(),
        );
        assert!(
            a == b && !a.parsed() && !b.parsed(),
            "equal texts compare without parsing"
        );
        assert_eq!(a, Toolkit::from(varied_specs()));
        // The same specs with the keys of a schema in another order: another text, equal specs.
        let reordered = text.replace(r#""type":"array","items":{}"#, r#""items":{},"type":"array""#);
        assert_ne!(reordered, *text);
        let c = Toolkit::from_json(reordered.into()).unwrap();
        assert_eq!(c, a);
        assert_ne!(Toolkit::from_json(r#"[{"name":"x"}]"#.into()).unwrap(), a);
        let mut written = a.clone();
        written.pop();
        assert_ne!(written.id(), a.id());
        assert_eq!(written.names().len(), 2);
        assert_eq!(&**written.json(), serde_json::to_string(&varied_specs()[..2]).unwrap());
        assert_eq!(&**a.json(), &*text, "the other holder keeps its text");
        assert!(!b.parsed());
        let mut copy = b.clone();
        copy.push(ToolSpec::reference("x"));
        assert!(b.parsed(), "a write parses the shared list once, then copies it");
        assert_eq!((b.names().len(), copy.names().len()), (3, 4));
    }

    #[test]
    fn a_toolkit_text_is_accepted_exactly_when_its_specs_parse() {
        let texts = [
            r#"[]"#,
            r#"[{"name":"a"}]"#,
            r#"[{"name":"a","description":"d","parameters":{"x":[1,{"y":null}]},"output_parameters":7}]"#,
            r#"[{"name":"a","extra":{"ignored":true}}]"#,
            r#"[{"name":"a","description":"","parameters":null}]"#,
            r#"[{"name":"a","description":"d"},{"name":"b","parameters":{}}]"#,
            r#"[{"name":"a","description":"","parameters":[]}]"#,
            r#"[{"name":"a","parameters":null,"description":"d"}]"#,
            r#"[["a","",null]]"#,
            r#"[["a","d",{},null]]"#,
            r#"[["a"]]"#,
            r#"[{"name":"a","parameters":1e400}]"#,
            r#"[{"name":"a","name":"b"}]"#,
            r#"[{"name":"a","description":null}]"#,
            r#"[{"name":"a","description":3}]"#,
            r#"[{"description":"no name"}]"#,
            r#"[{"name":7}]"#,
            r#"[{"name":"a","parameters":{"k":"\ud800"}}]"#,
            r#"[{"name":"a","parameters":{"k":[1,]}}]"#,
            r#"{"name":"a"}"#,
            r#"[{"name":"a"}] x"#,
            r#"[1]"#,
            r#"null"#,
        ];
        for t in texts {
            let specs = serde_json::from_str::<Vec<ToolSpec>>(t);
            let lazy = Toolkit::from_json(t.into());
            assert_eq!(lazy.is_ok(), specs.is_ok(), "{t}: {lazy:?} vs {specs:?}");
            if let (Ok(lazy), Ok(specs)) = (lazy, specs) {
                let references = lazy.has_references();
                assert!(!lazy.parsed());
                assert_eq!(references, specs.iter().any(ToolSpec::is_reference), "{t}");
                assert_eq!(lazy.as_slice(), specs.as_slice(), "{t}");
            }
        }
        let deep = format!(
            r#"[{{"name":"a","parameters":{}{}}}]"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_eq!(
            Toolkit::from_json(deep.as_str().into()).is_ok(),
            serde_json::from_str::<Vec<ToolSpec>>(&deep).is_ok()
        );
    }
}
