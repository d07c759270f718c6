//! The crate's layout rules (issue 10), checked on the source itself:
//!
//! - no import cycle between top-level modules (`src/<module>.rs` or `src/<module>/`): every
//!   `crate::<module>` path a file names — in `use` lines, grouped `use crate::{a, b::c}` lists and
//!   inline paths, outside comments and string literals — is an edge from the file's module to
//!   `<module>`; `main.rs` counts its `toolforge::<module>` paths. A cycle fails the test and is
//!   printed with the file and line of each edge. The one known upward edge still being removed by
//!   its owner is listed in [`ALLOWED_EDGES`]; an entry whose edge is gone fails the test.
//! - no source file over [`MAX_LINES`] lines, except the few in [`ALLOWED_LONG`], each with the
//!   reason (and who is splitting it). An entry whose file is gone or back under the limit fails
//!   too, so the list only ever shrinks.
//!
//! The module order the graph implies (every module after all it imports) is printed with
//! `cargo test --test layout -- --nocapture`; ARCHITECTURE.md's "Module dependency order" is
//! that list.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Most lines in one source file ("one concept per file, no file over ~600 lines").
const MAX_LINES: usize = 600;

/// Files allowed over [`MAX_LINES`], with why. Remove an entry when its file is split.
const ALLOWED_LONG: &[(&str, &str)] = &[];

/// Upward imports tolerated while their owner removes them: (from module, to module, file, why).
/// Only imports from that file are tolerated; the same edge from any other file still counts.
const ALLOWED_EDGES: &[(&str, &str, &str, &str)] = &[];

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, relative to `src/`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p.strip_prefix(src()).expect("under src").to_path_buf());
        }
    }
}

/// The top-level module a file belongs to: `emit` for `emit/rows.rs` and for `emit.rs`.
fn module_of(rel: &Path) -> String {
    let first = rel.components().next().expect("non-empty path");
    let s = first.as_os_str().to_string_lossy();
    s.strip_suffix(".rs").unwrap_or(&s).to_string()
}

/// The code of a Rust file with comments and the contents of string and char literals blanked
/// (newlines kept, so line numbers stay right).
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !b
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // Raw string r"…" / r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push('"');
            j += 1;
            while j < b.len() {
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                out.push(blank(b[j]));
                j += 1;
            }
            out.push('"');
            i = j;
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' {
            // A char literal ('a', '\n', '\u{..}'), else a lifetime.
            let close = if next == Some('\\') {
                (i + 2..b.len().min(i + 12)).find(|&j| b[j] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(j) => {
                    out.push_str(&" ".repeat(j + 1 - i));
                    i = j + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The first path segment of each item of a `{…}` list (nested braces skipped), e.g.
/// `{a::b, c, d::{e, f}}` → a, c, d.
fn group_heads(s: &[char]) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut at_item_start = true;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        match c {
            '{' => {
                depth += 1;
                at_item_start = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => at_item_start = true,
            _ if depth == 1 && at_item_start && is_ident(c) => {
                let start = i;
                while i < s.len() && is_ident(s[i]) {
                    i += 1;
                }
                heads.push(s[start..i].iter().collect());
                at_item_start = false;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    heads
}

/// (module named, line) of every `<prefix>::<module>` path in `code` (prefix `crate`, or
/// `toolforge` for the binary).
fn referenced_modules(code: &str, prefix: &str) -> Vec<(String, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let pat: Vec<char> = format!("{prefix}::").chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\n' {
            line += 1;
        }
        let preceded_by_ident = i > 0 && (is_ident(chars[i - 1]) || chars[i - 1] == ':');
        if !preceded_by_ident && chars[i..].starts_with(&pat) {
            let mut j = i + pat.len();
            while chars.get(j).is_some_and(|c| c.is_whitespace()) {
                j += 1;
            }
            if chars.get(j) == Some(&'{') {
                for h in group_heads(&chars[j..]) {
                    out.push((h, line));
                }
            } else {
                let start = j;
                while chars.get(j).is_some_and(|c| is_ident(*c)) {
                    j += 1;
                }
                if j > start {
                    out.push((chars[start..j].iter().collect(), line));
                }
            }
            i += pat.len();
            continue;
        }
        i += 1;
    }
    out
}

/// module → module it imports → evidence (`file:line`).
type Graph = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// The module graph, and the [`ALLOWED_EDGES`] entries actually found (left out of the graph).
fn module_graph() -> (Graph, BTreeSet<(String, String, String)>) {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(f)).filter(|m| m != "lib").collect();
    let mut graph: Graph = modules.iter().map(|m| (m.clone(), BTreeMap::new())).collect();
    let mut allowed_seen = BTreeSet::new();
    for f in &files {
        let from = module_of(f);
        if from == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(src().join(f)).expect("readable source");
        let code = code_only(&text);
        let prefix = if from == "main" { "toolforge" } else { "crate" };
        let name = f.to_string_lossy().replace('\\', "/");
        for (to, line) in referenced_modules(&code, prefix) {
            if to == from || !modules.contains(&to) {
                continue; // own module, or an item of lib.rs / a macro
            }
            if ALLOWED_EDGES
                .iter()
                .any(|(a, b, file, _)| *a == from && *b == to && *file == name)
            {
                allowed_seen.insert((from.clone(), to.clone(), name.clone()));
                continue;
            }
            graph
                .get_mut(&from)
                .expect("known module")
                .entry(to)
                .or_default()
                .push(format!("src/{}:{line}", f.display()));
        }
    }
    (graph, allowed_seen)
}

/// The strongly connected components with more than one module (Tarjan), each sorted.
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct T<'g> {
        g: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(t: &mut T<'g>, v: &'g str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g[v].keys() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = t.stack.pop().expect("on stack");
                t.on.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// One cycle through `scc` starting at its first module, as `a → b → … → a`, with each edge's
/// first evidence.
fn describe_cycle(graph: &Graph, scc: &[String]) -> String {
    let inside: BTreeSet<&str> = scc.iter().map(String::as_str).collect();
    // Breadth-first from scc[0] back to itself inside the component.
    let start = scc[0].as_str();
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    let mut end = None;
    while let Some(v) = queue.pop_front() {
        for w in graph[v].keys().map(String::as_str).filter(|w| inside.contains(w)) {
            if w == start {
                end = Some(v);
                break;
            }
            if !prev.contains_key(w) {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
        if end.is_some() {
            break;
        }
    }
    let mut path = vec![start];
    let mut v = end.expect("a cycle closes in a strongly connected component");
    let mut back = vec![v];
    while v != start {
        v = prev[v];
        if v != start {
            back.push(v);
        }
    }
    back.reverse();
    path.extend(back);
    path.push(start);
    path.windows(2)
        .map(|w| format!("{} → {} ({})", w[0], w[1], graph[w[0]][w[1]][0]))
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// A topological order of the graph (every module after all it imports), ties by name.
fn dependency_order(graph: &Graph) -> Vec<String> {
    let mut done: Vec<String> = Vec::new();
    let mut left: BTreeSet<&str> = graph.keys().map(String::as_str).collect();
    while !left.is_empty() {
        let ready: Vec<&str> = left
            .iter()
            .copied()
            .filter(|m| graph[*m].keys().all(|d| done.contains(d)))
            .collect();
        if ready.is_empty() {
            break; // a cycle: reported by the cycle test
        }
        for m in ready {
            left.remove(m);
            done.push(m.to_string());
        }
    }
    done
}

#[test]
fn no_import_cycle_between_modules() {
    let (graph, allowed_seen) = module_graph();
    println!("module → modules it imports (`use crate::` and inline `crate::` paths):");
    for (m, deps) in &graph {
        println!("  {m:<10} → {}", deps.keys().cloned().collect::<Vec<_>>().join(", "));
    }
    println!(
        "dependency order (leaves first): {}",
        dependency_order(&graph).join(", ")
    );
    for (a, b, file, why) in ALLOWED_EDGES {
        println!("tolerated upward import {a} → {b} in src/{file}: {why}");
    }
    let found = cycles(&graph);
    let mut report: Vec<String> = found
        .iter()
        .map(|scc| format!("cycle among {{{}}}:\n  {}", scc.join(", "), describe_cycle(&graph, scc)))
        .collect();
    for (a, b, file, _) in ALLOWED_EDGES {
        if !allowed_seen.contains(&(a.to_string(), b.to_string(), file.to_string())) {
            report.push(format!(
                "src/{file} no longer imports {b} from {a}: remove the entry from ALLOWED_EDGES in tests/layout.rs"
            ));
        }
    }
    assert!(
        report.is_empty(),
        "import cycles between modules (or stale ALLOWED_EDGES):\n{}",
        report.join("\n")
    );
}

#[test]
fn no_file_over_the_line_limit() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let allowed: BTreeMap<&str, &str> = ALLOWED_LONG.iter().copied().collect();
    let mut problems = Vec::new();
    for f in &files {
        let name = f.to_string_lossy().replace('\\', "/");
        let n = std::fs::read_to_string(src().join(f))
            .expect("readable")
            .lines()
            .count();
        match (n > MAX_LINES, allowed.contains_key(name.as_str())) {
            (true, false) => problems.push(format!(
                "src/{name}: {n} lines (limit {MAX_LINES}); split it by concept"
            )),
            (false, true) => problems.push(format!(
                "src/{name}: {n} lines, under the limit now; remove it from ALLOWED_LONG in tests/layout.rs"
            )),
            _ => {}
        }
    }
    for name in allowed.keys() {
        if !src().join(name).is_file() {
            problems.push(format!(
                "src/{name} is in ALLOWED_LONG but does not exist; remove the entry"
            ));
        }
    }
    assert!(problems.is_empty(), "file length rule:\n{}", problems.join("\n"));
}

#[test]
fn the_checker_finds_paths_and_cycles() {
    // The scanner: grouped, nested and inline paths count; comments and strings do not.
    let code = code_only(
        "use crate::{a::X, b, c::{d, e}};\n// crate::f\nlet s = \"crate::g\";\nlet c = '\"';\nlet x = crate::h::y(); /* crate::i */ fn f<'a>(x: &'a str) { crate::j::k() }\nlet r = r#\"crate::l\"#;\n",
    );
    let got: Vec<(String, usize)> = referenced_modules(&code, "crate");
    let names: Vec<&str> = got.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(names, ["a", "b", "c", "h", "j"]);
    assert_eq!(got[3].1, 5, "line numbers survive blanking");
    // A two-module cycle and a three-module cycle are found; a chain is not a cycle.
    let mut g: Graph = BTreeMap::new();
    for (from, to) in [("a", "b"), ("b", "a"), ("c", "d"), ("d", "e"), ("e", "c"), ("f", "a")] {
        g.entry(from.into())
            .or_default()
            .insert(to.into(), vec![format!("{from}.rs:1")]);
        g.entry(to.into()).or_default();
    }
    let found = cycles(&g);
    let got: BTreeSet<Vec<String>> = found.iter().cloned().collect();
    let want: BTreeSet<Vec<String>> = [vec!["a", "b"], vec!["c", "d", "e"]]
        .iter()
        .map(|v| v.iter().map(|s| s.to_string()).collect())
        .collect();
    assert_eq!(got, want);
    assert!(describe_cycle(&g, &found[0]).contains("→"));
}
