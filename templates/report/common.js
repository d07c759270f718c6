// toolforge report pages: helpers both pages share (inlined). Every text from the data is set
// as a DOM text node, never parsed as HTML.
"use strict";
const TF = {};
// el("td", {class: "num"}, child, "text", …): an element; null/undefined children skipped.
TF.el = function (tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "class") e.className = v;
    else if (k === "style") e.style.cssText = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
};
TF.pct = function (a, b) { return b ? (100 * a / b).toFixed(1) : "0.0"; };
TF.fmt = function (v) { return typeof v === "string" ? v : JSON.stringify(v); };
// A horizontal bar `frac` (0..1) of the cell's width.
TF.bar = function (frac, cls) {
  const w = Math.max(0, Math.min(1, frac)) * 200;
  return TF.el("span", {class: "bar" + (cls ? " " + cls : ""), style: "width:" + w.toFixed(1) + "px"});
};
// One call [name, arguments, label] or {name, arguments, label} as `label = name(k=v, …)`.
TF.call = function (c) {
  const name = Array.isArray(c) ? c[0] : c.name;
  const args = (Array.isArray(c) ? c[1] : c.arguments) || {};
  const label = Array.isArray(c) ? c[2] : c.label;
  const parts = [];
  const keys = typeof args === "object" ? Object.keys(args) : [];
  keys.forEach((k, i) => {
    if (i) parts.push(", ");
    parts.push(k + "=" + TF.fmt(args[k]));
  });
  if (typeof args === "string") parts.push(args);
  return TF.el("div", {class: "call mono"},
    label ? TF.el("span", {class: "label"}, label + " = ") : null,
    TF.el("span", {class: "name"}, name), "(", parts.join(""), ")");
};
TF.calls = function (list) {
  if (!list || !list.length) return TF.el("div", {class: "muted"}, "(no calls)");
  return TF.el("div", {}, list.map(TF.call));
};
// The longest common subsequence alignment of two token lists: [[op, token]], op in " -+".
TF.lcs = function (a, b) {
  const n = a.length, m = b.length;
  if (n * m > 4e6) return a.map(t => ["-", t]).concat(b.map(t => ["+", t]));
  const d = [];
  for (let i = 0; i <= n; i++) d.push(new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      d[i][j] = a[i] === b[j] ? d[i + 1][j + 1] + 1 : Math.max(d[i + 1][j], d[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push([" ", a[i]]); i++; j++; }
    else if (d[i + 1][j] >= d[i][j + 1]) out.push(["-", a[i++]]);
    else out.push(["+", b[j++]]);
  }
  while (i < n) out.push(["-", a[i++]]);
  while (j < m) out.push(["+", b[j++]]);
  return out;
};
// A word-level diff of two texts: deletions as <del>, insertions as <ins>.
TF.textDiff = function (oldText, newText) {
  const tok = s => (s || "").split(/(\s+)/).filter(t => t.length);
  return TF.el("div", {class: "textdiff"}, TF.lcs(tok(oldText), tok(newText)).map(([op, t]) =>
    op === " " ? t : TF.el(op === "-" ? "del" : "ins", {}, t)));
};
// A line diff of two JSON values side by side: removed lines marked in the old column, added
// lines in the new one.
TF.jsonDiff = function (oldV, newV) {
  const a = JSON.stringify(oldV, null, 2).split("\n"), b = JSON.stringify(newV, null, 2).split("\n");
  const left = TF.el("div", {class: "diffcol"}), right = TF.el("div", {class: "diffcol"});
  for (const [op, line] of TF.lcs(a, b)) {
    if (op !== "+") left.appendChild(TF.el("div", {class: op === "-" ? "rm" : null}, line));
    if (op !== "-") right.appendChild(TF.el("div", {class: op === "+" ? "add" : null}, line));
  }
  return TF.el("div", {class: "side schema-diff"},
    TF.el("div", {}, TF.el("h3", {}, "A_old"), left), TF.el("div", {}, TF.el("h3", {}, "A_new"), right));
};
// A paginated, searchable list: `rows` the items, `haystack(row)` the lower-case text a search
// looks in, `render(rows, tbody)` draws a page. Returns {refresh}.
TF.browser = function (opts) {
  const state = {page: 0, hits: opts.rows.map((_, i) => i), size: opts.pageSize || 50};
  const hay = new Array(opts.rows.length);
  const count = TF.el("span", {class: "muted", id: opts.id + "-count"});
  const pageLabel = TF.el("span", {class: "muted"});
  const prev = TF.el("button", {onclick: () => { state.page--; draw(); }}, "‹ prev");
  const next = TF.el("button", {onclick: () => { state.page++; draw(); }}, "next ›");
  const input = TF.el("input", {type: "search", id: opts.id + "-search", placeholder: opts.placeholder || "search"});
  const extra = opts.filters || [];
  let timer = null;
  function search() {
    const q = input.value.trim().toLowerCase();
    const hits = [];
    for (let i = 0; i < opts.rows.length; i++) {
      if (extra.some(f => !f.keep(opts.rows[i]))) continue;
      if (q) {
        if (hay[i] === undefined) hay[i] = opts.haystack(opts.rows[i]);
        if (hay[i].indexOf(q) < 0) continue;
      }
      hits.push(i);
    }
    state.hits = hits; state.page = 0; draw();
  }
  input.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(search, 120); });
  extra.forEach(f => f.control.addEventListener("change", search));
  function draw() {
    const pages = Math.max(1, Math.ceil(state.hits.length / state.size));
    state.page = Math.max(0, Math.min(state.page, pages - 1));
    const slice = state.hits.slice(state.page * state.size, (state.page + 1) * state.size).map(i => opts.rows[i]);
    count.textContent = state.hits.length + " of " + opts.rows.length;
    count.setAttribute("data-hits", String(state.hits.length));
    pageLabel.textContent = "page " + (state.page + 1) + " / " + pages;
    prev.disabled = state.page === 0; next.disabled = state.page >= pages - 1;
    opts.tbody.replaceChildren();
    opts.render(slice, opts.tbody);
    opts.tbody.setAttribute("data-query", input.value);
  }
  opts.controls.replaceChildren(input, ...extra.map(f => f.control), prev, pageLabel, next, count);
  draw();
  return {refresh: search};
};
