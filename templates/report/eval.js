// toolforge eval page (eval/<run>/index.html): reads the JSON block #tf-data; its schema is
// in src/eval/html.rs (`run_data`).
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("tf-data").textContent);
  const el = TF.el, $ = id => document.getElementById(id);
  const p = v => (100 * v).toFixed(1);
  $("accounting-line").textContent = "dataset " + D.dataset + " · model " + D.model + " · mode " + D.mode +
    " · " + D.rows + " rows, " + D.scored + " scored, " + D.missing + " missing, " + D.failed + " failed";
  const mt = $("metric-table").querySelector("tbody");
  for (const m of D.metrics)
    mt.appendChild(el("tr", {"data-metric": m.key}, el("td", {}, m.header),
      el("td", {class: "num"}, p(m.mean)),
      el("td", {class: "num"}, m.lo === undefined ? "–" : "[" + p(m.lo) + ", " + p(m.hi) + "]"),
      el("td", {class: "num"}, m.n), el("td", {class: "muted"}, m.source)));
  const tax = Object.entries(D.taxonomy || {});
  if (tax.length) $("taxonomy").replaceChildren(el("h3", {}, "Error taxonomy"), el("table", {id: "taxonomy-table"},
    el("thead", {}, el("tr", {}, el("th", {}, "kind"), el("th", {class: "num"}, "count"), el("th", {class: "num"}, "rows"))),
    el("tbody", {}, tax.map(([k, c]) => el("tr", {}, el("td", {}, k), el("td", {class: "num"}, c.count), el("td", {class: "num"}, c.rows))))));
  const stops = Object.entries(D.stop_reasons || {});
  if (stops.length) $("stops").replaceChildren(el("h3", {}, "Agent stop reasons"),
    el("ul", {}, stops.map(([k, n]) => el("li", {}, k + ": " + n))));
  const ow = D.open_world;
  if (ow) {
    const f = v => v.toFixed(3);
    const row = (name, s) => el("tr", {"data-ranking": name}, el("td", {}, name), el("td", {class: "num"}, s.queries),
      el("td", {class: "num"}, f(s["recall@1"])), el("td", {class: "num"}, f(s["recall@5"])), el("td", {class: "num"}, f(s["recall@10"])),
      el("td", {class: "num"}, f(s["ndcg@10"])), el("td", {class: "num"}, f(s.mrr)));
    $("open-world").replaceChildren(el("h3", {}, "Open world: the model's searches"),
      el("p", {class: "muted"}, "Only search_tools and call_tool over " + ow.catalog_tools + " tools; " + ow.rows + " rows (" +
        ow.rows_without_relevant_tools + " without a relevant tool), " + ow.rows_searching + " searched, " + ow.searches +
        " searches; share of relevant tools found by any search " + f(ow.found) + "."),
      el("table", {id: "open-world-table"}, el("thead", {}, el("tr", {}, ["ranking", "queries", "Recall@1", "Recall@5", "Recall@10", "nDCG@10", "MRR"]
        .map((h, i) => el("th", {class: i ? "num" : null}, h)))),
        el("tbody", {}, row("by_row", ow.by_row), row("by_search", ow.by_search))));
  }
  for (const c of D.charts) $("chart-list").appendChild(el("img", {src: c, alt: c}));
  const names = Object.fromEntries(D.columns);
  for (const [kind, groups] of Object.entries(D.by || {})) {
    const entries = Object.entries(groups);
    if (entries.length < 2) continue;
    const cols = D.columns.map(c => c[0]).filter(k => entries.some(([, s]) => s.metrics[k]));
    $("breakdown-list").appendChild(el("div", {}, el("h3", {}, "By " + kind),
      el("table", {"data-breakdown": kind}, el("thead", {}, el("tr", {}, el("th", {}, kind), el("th", {class: "num"}, "rows"),
        cols.map(k => el("th", {class: "num"}, names[k])))),
      el("tbody", {}, entries.map(([g, s]) => el("tr", {"data-group": g}, el("td", {}, g), el("td", {class: "num"}, s.rows),
        cols.map(k => el("td", {class: "num"}, s.metrics[k] ? p(s.metrics[k].mean) : "–"))))))));
  }
  function key(c) { return c ? JSON.stringify([c[0], c[1]]) : ""; }
  function show(f) {
    const gold = f.gold || [], pred = f.predicted || [];
    const n = Math.max(gold.length, pred.length);
    const aligned = [];
    for (let i = 0; i < n; i++) {
      const same = key(gold[i]) === key(pred[i]);
      aligned.push(el("tr", {class: same ? "" : "mismatch"}, el("td", {class: "num"}, i + 1),
        el("td", {}, gold[i] ? TF.call(gold[i]) : el("span", {class: "muted"}, "—")),
        el("td", {}, pred[i] ? TF.call(pred[i]) : el("span", {class: "muted"}, "—")),
        el("td", {}, el("span", {class: same ? "tag ok" : "tag bad"}, same ? "same" : "differs"))));
    }
    const agent = Object.entries(f.agent || {});
    // The episode's turns as a chat: the model's text and calls, each tool result as it saw it.
    const turn = m => el("div", {class: "msg " + m.role, "data-role": m.role},
      el("div", {class: "role"}, m.role + (m.tool_call_id ? " (" + m.tool_call_id + ")" : "")),
      m.content ? el("pre", {}, m.content) : null,
      (m.tool_calls || []).map(c => TF.call([c.function ? c.function.name : c.name,
        (() => { const a = c.function ? c.function.arguments : c.arguments; try { return typeof a === "string" ? JSON.parse(a) : a; } catch (e) { return a; } })(), c.id])));
    const turns = f.turns || [], searches = f.searches || [];
    $("failure").replaceChildren(el("div", {class: "panel", "data-id": f.id},
      el("div", {}, el("code", {}, f.id), " ", el("span", {class: "tag"}, f.status), el("span", {class: "tag"}, f.group)),
      el("h3", {}, "Request"), el("div", {}, f.input || ""),
      f.setup && f.setup.length ? el("div", {}, el("h3", {}, "Setup"), TF.calls(f.setup)) : null,
      el("h3", {}, "Gold vs predicted"),
      el("table", {class: "aligned"}, el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "gold"), el("th", {}, "predicted"), el("th", {}, ""))),
        el("tbody", {}, aligned)),
      el("h3", {}, "Failed checks"),
      el("div", {class: "checks"}, f.failed_checks.map(c => el("span", {class: "tag bad"}, c)),
        Object.entries(f.error_kinds || {}).map(([k, v]) => el("span", {class: "tag"}, k + " ×" + v))),
      f.errors.length ? el("ul", {}, f.errors.map(e => el("li", {}, e))) : null,
      agent.length ? el("div", {class: "agent"}, el("h3", {}, "Agent / answer"),
        el("table", {}, el("tbody", {}, agent.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, el("pre", {}, TF.fmt(v)))))))) : null,
      searches.length ? el("div", {class: "searches"}, el("h3", {}, "Searches"),
        el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "query"), el("th", {}, "hits"))),
          el("tbody", {}, searches.map(s => el("tr", {}, el("td", {}, s.query), el("td", {class: "mono"}, s.hits.join(", "))))))) : null,
      turns.length ? el("div", {class: "turns chat"}, el("h3", {}, "Turns (" + turns.length + " messages after the system prompt)"),
        turns.map(turn)) : null));
  }
  const F = D.failures;
  TF.browser({
    id: "failures", rows: F, tbody: $("failure-table").querySelector("tbody"), controls: $("failures-controls"),
    placeholder: "search id, request, group, check",
    haystack: f => (f.id + "\n" + (f.input || "") + "\n" + f.group + "\n" + f.failed_checks.join(" ") + "\n" + f.errors.join("\n")).toLowerCase(),
    render: (rows, tbody) => rows.forEach(f => tbody.appendChild(el("tr", {class: "pick", "data-id": f.id, onclick: () => show(f)},
      el("td", {class: "mono"}, f.id), el("td", {}, f.group), el("td", {}, f.failed_checks.join(", ") || f.status)))),
  });
  if (F.length) show(F[0]);
  else $("failure").textContent = "No row failed a check.";
  document.body.setAttribute("data-ready", "1");
})();
