//! TOPv2 bracketed semantic parses → trees ([`parse`]), and the alignment of the parse's words
//! with the raw utterance ([`align`]).

/// A node of a parse tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// A word: its index among the parse's words.
    Word(usize),
    /// `[IN:NAME ...]`.
    Intent(Frame),
    /// `[SL:NAME ...]`.
    Slot(Frame),
}

/// A bracketed intent or slot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Frame {
    /// The name without the `IN:`/`SL:` prefix.
    pub name: String,
    /// Children in order.
    pub children: Vec<Node>,
}

/// A parsed semantic parse: the root intent and the words in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tree<'a> {
    pub root: Frame,
    pub words: Vec<&'a str>,
}

/// Parses a TOP semantic parse (whitespace-separated tokens; `[IN:X`, `[SL:X` open, `]` closes).
pub(crate) fn parse(text: &str) -> Result<Tree<'_>, String> {
    struct P<'a> {
        toks: Vec<&'a str>,
        pos: usize,
        words: Vec<&'a str>,
    }
    impl<'a> P<'a> {
        /// At an opening token: reads the frame up to its `]`.
        fn frame(&mut self) -> Result<Node, String> {
            let open = self.pos;
            let tok = self.toks[open];
            let label = &tok[1..];
            let (is_intent, name) = if let Some(n) = label.strip_prefix("IN:") {
                (true, n)
            } else if let Some(n) = label.strip_prefix("SL:") {
                (false, n)
            } else {
                return Err(format!("token {}: `{tok}` is neither `[IN:…` nor `[SL:…`", open + 1));
            };
            if name.is_empty() || name.contains(['[', ']']) {
                return Err(format!("token {}: bad label `{tok}`", open + 1));
            }
            self.pos += 1;
            let mut children = Vec::new();
            loop {
                let Some(&t) = self.toks.get(self.pos) else {
                    return Err(format!("`{tok}` opened at token {} is never closed", open + 1));
                };
                if t == "]" {
                    self.pos += 1;
                    break;
                } else if t.starts_with('[') {
                    children.push(self.frame()?);
                } else {
                    children.push(Node::Word(self.words.len()));
                    self.words.push(t);
                    self.pos += 1;
                }
            }
            let frame = Frame {
                name: name.to_string(),
                children,
            };
            Ok(if is_intent {
                Node::Intent(frame)
            } else {
                Node::Slot(frame)
            })
        }
    }
    let mut p = P {
        toks: text.split_whitespace().collect(),
        pos: 0,
        words: Vec::new(),
    };
    match p.toks.first() {
        None => return Err("empty semantic parse".into()),
        Some(t) if !t.starts_with("[IN:") => {
            return Err(format!("the parse must start with an intent `[IN:…`, found `{t}`"));
        }
        _ => {}
    }
    let root = match p.frame()? {
        Node::Intent(f) => f,
        _ => unreachable!("checked above"),
    };
    if p.pos != p.toks.len() {
        return Err(format!(
            "token {}: `{}` after the root intent was closed",
            p.pos + 1,
            p.toks[p.pos]
        ));
    }
    Ok(Tree { root, words: p.words })
}

/// Character spans of `words` in `utterance`, in order (whitespace between them skipped), or
/// `None` when the words do not spell the utterance.
pub(crate) fn align(utterance: &str, words: &[&str]) -> Option<Vec<(usize, usize)>> {
    let mut pos = 0;
    let mut spans = Vec::with_capacity(words.len());
    for w in words {
        let rest = &utterance[pos..];
        let skipped = rest.len() - rest.trim_start().len();
        pos += skipped;
        if !utterance[pos..].starts_with(w) {
            return None;
        }
        spans.push((pos, pos + w.len()));
        pos += w.len();
    }
    Some(spans)
}
