// toolforge build page (report/index.html): reads window.TF_DATA (report/data.js), the search
// index window.TF_ROWS (report/rows.js) and, when a row is opened, its chunk report/rows/<n>.js
// (window.TF_CHUNK); schemas in src/emit/html/mod.rs and rows.rs.
"use strict";
(function () {
  const D = window.TF_DATA, R = window.TF_ROWS || [], P = D.id_prefix || "";
  const el = TF.el, $ = id => document.getElementById(id);
  // R[i] = [id without P, group, request, variant kind?, parent id without P?]
  const byId = new Map();
  R.forEach((r, i) => byId.set(r[0], i));
  const chunks = new Map(), waiting = new Map();
  window.TF_CHUNK = function (n, rows) {
    chunks.set(n, rows);
    (waiting.get(n) || []).forEach(f => f(rows));
    waiting.delete(n);
  };
  // The full row i (a promise): its chunk file is read once, by a <script> (file:// allows it).
  function full(i) {
    const n = Math.floor(i / D.chunk_rows), at = i % D.chunk_rows;
    if (chunks.has(n)) return Promise.resolve(chunks.get(n)[at]);
    return new Promise((resolve, reject) => {
      if (!waiting.has(n)) {
        waiting.set(n, []);
        const s = el("script", {src: "rows/" + n + ".js"});
        s.addEventListener("error", () => reject(new Error("rows/" + n + ".js not readable")));
        document.body.appendChild(s);
      }
      waiting.get(n).push(rows => resolve(rows[at]));
    });
  }

  // Summary: kept / attempted, per split, per group with bars of yield and drops.
  $("kept").textContent = D.kept;
  $("attempted").textContent = D.attempted;
  $("dropped").textContent = D.dropped;
  $("yield").textContent = TF.pct(D.kept, D.attempted) + "%";
  $("rowcount").textContent = R.length;
  const splits = $("splits").querySelector("tbody");
  for (const [s, n] of Object.entries(D.per_split || {}))
    splits.appendChild(el("tr", {"data-split": s}, el("td", {}, s), el("td", {class: "num"}, n)));
  $("group-kind").textContent = D.group_kind;
  const groups = $("groups").querySelector("tbody");
  for (const [g, v] of Object.entries(D.per_group || {})) {
    const dropped = v.attempted - v.kept;
    const top = Object.entries(v.dropped_by_reason || {}).sort((a, b) => b[1] - a[1]).slice(0, 3)
      .map(([r, n]) => r + " " + n).join(", ");
    groups.appendChild(el("tr", {"data-group": g},
      el("td", {}, g), el("td", {class: "num"}, v.attempted), el("td", {class: "num"}, v.kept),
      el("td", {class: "num"}, dropped), el("td", {class: "num"}, TF.pct(v.kept, v.attempted)),
      el("td", {class: "barcell"}, TF.bar(v.attempted ? v.kept / v.attempted : 0),
        TF.bar(v.attempted ? dropped / v.attempted : 0, "drop")),
      el("td", {class: "muted"}, top)));
  }

  // Drops by reason, each with up to five examples.
  const reasons = $("reasons").querySelector("tbody");
  const maxN = Math.max(1, ...Object.values(D.dropped_by_reason || {}));
  for (const [r, n] of Object.entries(D.dropped_by_reason || {}).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))) {
    // Each example: its request, what it was built from (SQL, parse, source record), the detail.
    const ex = (D.drop_examples[r] || []).map(d => el("div", {class: "panel drop-example", "data-id": d.id},
      el("div", {}, el("code", {}, d.id), " ", el("span", {class: "tag"}, d.group)),
      d.question ? el("div", {class: "drop-question"}, d.question) : null,
      d.source ? el("pre", {class: "drop-source mono"}, d.source) : null,
      el("pre", {class: "drop-detail"}, d.detail)));
    reasons.appendChild(el("tr", {"data-reason": r},
      el("td", {}, el("details", {}, el("summary", {}, r), ex)),
      el("td", {class: "num"}, n), el("td", {class: "barcell"}, TF.bar(n / maxN, "drop"))));
  }
  if (!reasons.children.length) $("reasons").replaceWith(el("p", {class: "muted"}, "No question was dropped."));

  // Row detail: question → calls → answer; a variant row beside its parent with the difference.
  function answer(a) {
    if (!a) return null;
    return el("div", {}, el("h3", {}, "Answer (" + a.n + " rows)"),
      el("pre", {}, a.rows.map(r => JSON.stringify(r)).join("\n") + (a.n > a.rows.length ? "\n…" : "")));
  }
  function rowView(r) {
    return el("div", {class: "rowview"},
      el("div", {}, el("code", {}, r.i), " ", el("span", {class: "tag"}, r.s), el("span", {class: "tag"}, r.g)),
      el("h3", {}, "Question"), el("div", {class: "question"}, r.q),
      r.e ? el("div", {class: "muted"}, "Evidence: " + r.e) : null,
      r.k ? el("pre", {class: "sql"}, r.k) : null,
      r.u ? el("div", {}, el("h3", {}, "Setup"), TF.calls(r.u)) : null,
      el("h3", {}, "Calls"), TF.calls(r.c), answer(r.a));
  }
  function difference(r, parent) {
    const x = r.x;
    const out = el("div", {class: "difference"}, el("h3", {}, "Difference (" + x.kind + ")"));
    if (x.schema) {
      for (const t of x.schema) out.appendChild(el("div", {}, el("div", {class: "mono"}, t.name + ": " +
        JSON.stringify(t.changes)), TF.jsonDiff(t.old, t.new)));
      if (x.changed_tools > x.schema.length)
        out.appendChild(el("div", {class: "muted"}, (x.changed_tools - x.schema.length) + " more tools of the toolkit changed (not called by this row)"));
    }
    if (x.added || x.removed) {
      out.appendChild(el("div", {class: "toolkit-diff"},
        (x.added || []).map(n => el("span", {class: "tag ok"}, "+ " + n)),
        (x.removed || []).map(n => el("span", {class: "tag bad"}, "− " + n))));
    }
    if (x.mapping) out.appendChild(el("pre", {}, JSON.stringify(x.mapping, null, 1)));
    if (parent && parent.q !== r.q) out.appendChild(el("div", {class: "text-diff"}, TF.textDiff(parent.q, r.q)));
    return out;
  }
  async function show(i) {
    const box = $("detail");
    const r = await full(i);
    if (r.x) {
      const pi = byId.get(R[i][4]), parent = pi === undefined ? null : await full(pi);
      box.replaceChildren(difference(r, parent), el("div", {class: "side"},
        el("div", {class: "panel"}, el("h3", {}, "Parent"), parent ? rowView(parent) : el("p", {}, r.x.of + " (not kept)")),
        el("div", {class: "panel"}, el("h3", {}, "Variant"), rowView(r))));
    } else {
      const kids = [];
      R.forEach((v, j) => { if (v[4] === R[i][0]) kids.push(j); });
      box.replaceChildren(el("div", {class: "panel"}, rowView(r)),
        kids.length ? el("div", {}, el("h3", {}, "Variants"), kids.map(j =>
          el("div", {}, el("a", {href: "#", "data-id": P + R[j][0], onclick: e => { e.preventDefault(); show(j); }},
            P + R[j][0] + " (" + R[j][3] + ")")))) : null);
    }
    box.setAttribute("data-id", r.i);
  }
  const kinds = [...new Set(R.map(r => r[3] || ""))].sort();
  const kindSel = el("select", {id: "rows-kind"}, el("option", {value: "*"}, "all rows"),
    kinds.map(k => el("option", {value: k}, k ? "variant: " + k : "original rows")));
  const browser = TF.browser({
    id: "rows", rows: R.map((r, i) => i), tbody: $("rows").querySelector("tbody"), controls: $("rows-controls"),
    placeholder: "search id, question, " + D.group_kind,
    haystack: i => (P + R[i][0] + "\n" + R[i][2] + "\n" + R[i][1]).toLowerCase(),
    filters: [{control: kindSel, keep: i => kindSel.value === "*" || (R[i][3] || "") === kindSel.value}],
    render: (rows, tbody) => rows.forEach(i => tbody.appendChild(el("tr", {class: "pick", "data-id": P + R[i][0],
      onclick: e => { tbody.querySelectorAll("tr.sel").forEach(t => t.classList.remove("sel"));
        e.currentTarget.classList.add("sel"); show(i); }},
      el("td", {class: "mono"}, P + R[i][0]), el("td", {}, R[i][1]), el("td", {}, R[i][2]),
      el("td", {}, R[i][3] ? el("span", {class: "tag"}, R[i][3]) : "")))),
  });
  void browser;

  // Trajectories: a chat view of the sampled trajectories, faulted ones marked.
  const T = D.trajectories || [];
  if (!T.length) $("trajectories-section").hidden = true;
  const list = $("trajectory-list");
  function chat(t) {
    return el("div", {class: "chat panel" + (t.faults ? " faulted" : ""), "data-id": t.id},
      el("div", {}, el("code", {}, t.id), " ", el("span", {class: "tag"}, t.file),
        t.faults ? el("span", {class: "tag bad"}, "faulted: " + JSON.stringify(t.faults)) : null),
      t.messages.map(m => el("div", {class: "msg " + m.role}, el("div", {class: "role"}, m.role + (m.name ? " · " + m.name : "")),
        m.content ? el("div", {}, m.content) : null,
        (m.tool_calls || []).map(c => TF.call({name: c.function.name, arguments: c.function.arguments, label: c.id})))));
  }
  T.forEach((t, i) => list.appendChild(el("tr", {class: "pick", "data-id": t.id, onclick: () => $("trajectory").replaceChildren(chat(t))},
    el("td", {class: "mono"}, t.id), el("td", {}, t.file), el("td", {}, t.faults ? el("span", {class: "tag bad"}, "faulted") : ""))));
  if (T.length) $("trajectory").replaceChildren(chat(T[0]));
  document.body.setAttribute("data-ready", "1");
})();
