// evalrun view: draws each page from the viewer's JSON API (docs/viewer.md).
// Everything from a bundle or the index is set as text (createTextNode, textContent, attribute
// values), never parsed as markup, so hostile ids, reasons and outputs stay inert.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const CASES_PER_PAGE = 50;
const RUNS_PER_PAGE = 50;
const ROWS_PER_PAGE = 100;

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "on") for (const [type, fn] of Object.entries(value)) node.addEventListener(type, fn);
    else if (key === "href") node.setAttribute("href", localHref(value));
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Links only ever point into the viewer: a path starting with one "/".
function localHref(path) {
  return /^\/(?!\/)/.test(path) ? path : "/";
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  return node;
}

async function api(path) {
  const reply = await fetch(path, { headers: { Accept: "application/json" } });
  let body = null;
  try { body = await reply.json(); } catch (_) { body = null; }
  if (!reply.ok) throw new Error((body && body.error) || `HTTP ${reply.status}`);
  return body;
}

function fixed(value, digits = 3) {
  return typeof value === "number" ? value.toFixed(digits) : "–";
}

function percent(value) {
  return typeof value === "number" ? `${(100 * value).toFixed(0)}%` : "–";
}

function interval(ci, format) {
  return Array.isArray(ci) ? ` [${format(ci[0])}, ${format(ci[1])}]` : "";
}

function badge(status) {
  return el("span", { class: `badge ${status || "absent"}` }, status || "absent");
}

function query() {
  return new URLSearchParams(location.search);
}

function setQuery(params) {
  const text = params.toString();
  history.replaceState(null, "", text ? `${location.pathname}?${text}` : location.pathname);
}

function crumbs(...parts) {
  const nav = document.getElementById("crumbs");
  nav.replaceChildren(...parts.flatMap((part, i) => (i ? [" › ", part] : [part])));
}

function show(...nodes) {
  document.getElementById("main").replaceChildren(...nodes.flat(Infinity).filter(Boolean));
}

function ready() {
  document.body.dataset.ready = "1";
}

function pager(start, total, size, go) {
  const end = Math.min(total, start + size);
  return el("div", { class: "pager" },
    el("button", { type: "button", class: "prev", disabled: start <= 0, on: { click: () => go(Math.max(0, start - size)) } }, "‹ Previous"),
    el("span", { class: "shown" }, total ? `${start + 1}–${end} of ${total}` : "none"),
    el("button", { type: "button", class: "next", disabled: end >= total, on: { click: () => go(start + size) } }, "Next ›"));
}

// ---- the run list ----------------------------------------------------------------------

async function runList() {
  crumbs("runs");
  const params = query();
  const start = Number(params.get("start") || 0);
  const ask = new URLSearchParams();
  for (const key of ["eval", "target", "verdict", "q"]) if (params.get(key)) ask.set(key, params.get(key));
  ask.set("start", String(start));
  ask.set("count", String(RUNS_PER_PAGE));
  const data = await api(`/api/runs?${ask}`);

  const refilter = (key, value) => {
    const next = query();
    if (value) next.set(key, value); else next.delete(key);
    next.delete("start");
    setQuery(next);
    route();
  };
  const choice = (key, label, values) => el("label", {}, label,
    el("select", { id: `filter-${key}`, on: { change: (e) => refilter(key, e.target.value) } },
      el("option", { value: "" }, "any"),
      values.map((v) => el("option", { value: v, selected: params.get(key) === v }, v))));
  const search = el("input", { id: "filter-q", type: "search", value: params.get("q") || "", placeholder: "eval, target, commit…" });
  search.addEventListener("change", () => refilter("q", search.value.trim()));
  const filters = el("div", { class: "filters" },
    choice("eval", "eval", data.evals), choice("target", "target", data.targets),
    choice("verdict", "verdict", ["passed", "failed"]), el("label", {}, "search", search));

  const chosen = new Set();
  const compareButton = el("button", { type: "button", id: "compare-selected", disabled: true }, "Compare selected");
  const byId = new Map(data.runs.map((r) => [r.id, r]));
  compareButton.addEventListener("click", () => {
    const runs = [...chosen].map((id) => byId.get(id))
      .sort((a, b) => String(a.started_at).localeCompare(String(b.started_at)) || a.id - b.id);
    const next = new URLSearchParams();
    for (const r of runs) next.append("run", String(r.id));
    location.assign(`/compare?${next}`);
  });
  const rows = data.runs.map((r) => el("tr", { dataset: { id: String(r.id) } },
    el("td", {}, el("input", { type: "checkbox", class: "pick", "aria-label": `select run ${r.id}`, on: { change: (e) => {
      if (e.target.checked) chosen.add(r.id); else chosen.delete(r.id);
      compareButton.disabled = chosen.size < 2 || chosen.size > 8;
    } } })),
    el("td", {}, el("a", { href: `/run/${r.id}`, class: "run-link" }, `#${r.id}`)),
    el("td", {}, badge(r.verdict)),
    el("td", {}, r.eval ? el("a", { href: `/history?eval=${encodeURIComponent(r.eval)}`, class: "history-link" }, r.eval) : "–"),
    el("td", {}, r.target || "–"),
    el("td", { class: "num" }, `${r.passed}/${r.total}`),
    el("td", { class: "num" }, fixed(r.mean_score)),
    el("td", { class: "wide-only" }, r.started_at || "–"),
    el("td", { class: "wide-only" }, r.git_commit ? r.git_commit.slice(0, 10) : "")));
  const table = el("div", { class: "scroll" }, el("table", { id: "run-table" },
    el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "run"), el("th", {}, "verdict"), el("th", {}, "eval"),
      el("th", {}, "target"), el("th", { class: "num" }, "passed"), el("th", { class: "num" }, "mean"),
      el("th", { class: "wide-only" }, "started"), el("th", { class: "wide-only" }, "commit"))),
    el("tbody", {}, rows)));
  const go = (at) => { const next = query(); next.set("start", String(at)); setQuery(next); route(); };
  show(el("h1", {}, "Runs"), filters,
    data.total ? [el("div", { class: "pager" }, compareButton), table, pager(start, data.total, RUNS_PER_PAGE, go)]
      : el("p", { class: "muted", id: "no-runs" }, "No runs match. Runs appear here once `evalrun FILE` has recorded them."));
  ready();
}

// ---- a run -----------------------------------------------------------------------------

function verdictBanner(head) {
  const c = head.counts || {};
  const parts = [`${head.problems} of ${c.total || 0} need a look`];
  parts.push(`pass rate ${percent(head.pass_rate)}${interval(head.pass_rate_ci, percent)}`);
  parts.push(`mean ${fixed(head.mean_score)}${interval(head.mean_score_ci, fixed)}`);
  const counts = ["passed", "failed", "error", "unscored"].filter((s) => c[s]).map((s) => `${c[s]} ${s}`).join(", ");
  return el("section", { id: "verdict", class: `verdict ${head.verdict}` },
    el("span", { class: "word" }, head.verdict),
    el("span", { class: "facts" }, parts.join(" · ")),
    el("span", { class: "facts muted" }, counts));
}

// A matrix run (docs/viewer.md, "A matrix run"): rows are cases, problem rows first; columns
// are targets (or target × prompt variant), each headed by its pass rate and mean; a cell is the
// status and the score.
const MATRIX_ROWS_SHOWN = 8;

function matrixSection(matrix, columns) {
  const stats = new Map((columns || []).map((c) => [c.column || c.target, c]));
  const rows = matrix.rows;
  const head = el("tr", {}, el("th", {}, "case"), rows.some((r) => r.repeat) ? el("th", { class: "num" }, "repeat") : null,
    matrix.columns.map((name) => {
      const c = stats.get(name) || {};
      return el("th", { class: "column" }, el("span", { class: "target" }, name),
        el("span", { class: "column-stats muted" },
          `${(c.counts || {}).passed || 0}/${(c.counts || {}).total || 0} · pass ${percent(c.pass_rate)}` +
          `${interval(c.pass_rate_ci, percent)} · mean ${fixed(c.mean_score)}${interval(c.mean_score_ci, fixed)}`));
    }));
  const withRepeat = rows.some((r) => r.repeat);
  const line = (r, i) => el("tr", { class: i >= MATRIX_ROWS_SHOWN ? "more-row" : null, hidden: i >= MATRIX_ROWS_SHOWN,
    dataset: { id: r.id } },
    el("td", { class: "id" }, r.id), withRepeat ? el("td", { class: "num" }, r.repeat) : null,
    matrix.columns.map((name) => {
      const cell = r.cells[name];
      return el("td", { class: "cell" }, cell ? [badge(cell.status), " ", fixed(cell.score)] : "–");
    }));
  const body = el("tbody", {}, rows.map(line));
  const hidden = Math.max(0, rows.length - MATRIX_ROWS_SHOWN);
  const more = hidden ? el("button", { type: "button", id: "matrix-more", on: { click: (e) => {
    for (const row of body.querySelectorAll("tr.more-row")) row.hidden = false;
    e.target.remove();
  } } }, `show ${hidden} more rows`) : null;
  const cut = matrix.more_rows ? el("p", { class: "muted" }, `… and ${matrix.more_rows} more rows: every result is in results.jsonl`) : null;
  return el("section", { id: "matrix" },
    el("h2", {}, `Matrix: ${rows.length + (matrix.more_rows || 0)} cases × ${matrix.columns.length} ` +
      ((columns || []).some((c) => c.prompt != null) ? "columns" : "targets")),
    el("div", { class: "scroll" }, el("table", { id: "matrix-table" }, el("thead", {}, head), body)), more, cut);
}

function graderTable(graders) {
  return el("div", { class: "scroll" }, el("table", { class: "graders" },
    el("thead", {}, el("tr", {}, el("th", {}, "grader"), el("th", {}, "status"), el("th", { class: "num" }, "score"),
      el("th", { class: "num" }, "threshold"), el("th", {}, "reason"))),
    el("tbody", {}, graders.map((g) => el("tr", {},
      el("td", {}, g.name), el("td", {}, badge(g.status)), el("td", { class: "num" }, fixed(g.score)),
      el("td", { class: "num" }, fixed(g.threshold, 2)), el("td", { class: "reason" }, g.reason || ""))))));
}

function graderExtras(g) {
  const out = [];
  if (g.hits && g.hits.length) out.push(el("p", {}, `${g.name} hits: `, g.hits.join(" · ")));
  if (g.misses && g.misses.length) out.push(el("p", {}, `${g.name} misses: `, g.misses.join(" · ")));
  if (g.checks && g.checks.length) out.push(el("pre", { class: "checks" }, JSON.stringify(g.checks, null, 2)));
  if (g.stderr_tail) out.push(el("p", { class: "muted" }, `${g.name} stderr:`), el("pre", { class: "stderr" }, g.stderr_tail));
  return out;
}

function judgeCall(call) {
  const head = `${call.grader} → ${call.target}: ${call.status}` +
    (typeof call.latency_ms === "number" ? `, ${call.latency_ms.toFixed(0)} ms` : "") +
    (call.cached ? ", cached" : "");
  return el("details", { class: "judge-call" }, el("summary", {}, head),
    call.system_prompt ? el("pre", {}, call.system_prompt) : null,
    el("pre", { class: "question" }, call.question || (call.task ? JSON.stringify(call.task, null, 2) : "")),
    el("pre", { class: "response" }, call.response || call.error_code || ""));
}

function caseBlock(c, open) {
  const summary = el("summary", {},
    badge(c.status), el("span", { class: "id" }, c.label), el("span", { class: "score" }, `score ${fixed(c.score)}`),
    c.reason ? el("span", { class: "reason" }, c.reason) : null);
  const body = el("div", { class: "body" },
    c.problems.length ? el("ul", { class: "problems" }, c.problems.map((p) => el("li", {}, p))) : null,
    c.output !== null && c.output !== undefined ? [el("h3", {}, "output"), el("pre", { class: "output" }, c.output)] : null,
    c.graders.length ? [el("h3", {}, "graders"), graderTable(c.graders), c.graders.map(graderExtras)] : null,
    c.judge_calls.length ? [el("h3", {}, `judge calls (${c.judge_calls.length})`), c.judge_calls.map(judgeCall)] : null,
    c.transcript ? [el("h3", {}, "transcript"), el("pre", { class: "transcript" }, JSON.stringify(c.transcript, null, 2))] : null);
  return el("details", { class: "case", open, dataset: { id: c.id, status: c.status } }, summary, body);
}

async function runPage(runId) {
  const params = query();
  const start = Number(params.get("start") || 0);
  const problemsOnly = params.get("problems") === "1";
  const head = await api(`/api/runs/${runId}`);
  const page = await api(`/api/runs/${runId}/cases?start=${start}&count=${CASES_PER_PAGE}${problemsOnly ? "&problems=true" : ""}`);
  const run = head.run;
  crumbs(el("a", { href: "/" }, "runs"),
    run.eval ? el("a", { href: `/history?eval=${encodeURIComponent(run.eval)}` }, run.eval) : "run",
    `#${run.id}`);
  const go = (at, only = problemsOnly) => {
    const next = new URLSearchParams();
    if (at) next.set("start", String(at));
    if (only) next.set("problems", "1");
    setQuery(next);
    route();
  };
  const toggle = el("label", {}, el("input", { type: "checkbox", id: "problems-only", checked: problemsOnly,
    on: { change: (e) => go(0, e.target.checked) } }), " problems only");
  const firstOpen = page.cases.findIndex((c) => c.status !== "passed");
  const graders = Object.entries(head.graders || {});
  show(verdictBanner(head),
    head.matrix ? matrixSection(head.matrix, head.columns) : null,
    el("section", { id: "cases" },
      el("div", { class: "pager" }, el("strong", {}, `${head.title} · ${run.target || "–"}`), toggle),
      el("div", { id: "case-list" }, page.cases.map((c, i) => caseBlock(c, i === firstOpen && start === 0))),
      pager(start, page.total, CASES_PER_PAGE, (at) => go(at))),
    el("h2", {}, "Graders"),
    el("div", { class: "scroll" }, el("table", { id: "grader-stats" },
      el("thead", {}, el("tr", {}, el("th", {}, "grader"), el("th", { class: "num" }, "mean"), el("th", { class: "num" }, "pass rate"),
        el("th", { class: "num" }, "passed"), el("th", { class: "num" }, "failed"), el("th", { class: "num" }, "error"), el("th", { class: "num" }, "unscored"))),
      el("tbody", {}, graders.map(([name, g]) => el("tr", {}, el("td", {}, name), el("td", { class: "num" }, fixed(g.mean)),
        el("td", { class: "num" }, percent(g.pass_rate)), el("td", { class: "num" }, g.passed), el("td", { class: "num" }, g.failed),
        el("td", { class: "num" }, g.error), el("td", { class: "num" }, g.unscored)))))),
    el("h2", {}, "Run"),
    el("pre", { id: "run-meta" }, JSON.stringify({ ...head.meta, bundle: run.bundle, git_commit: run.git_commit, judge_calls: head.judge }, null, 2)));
  ready();
}

// ---- comparing runs --------------------------------------------------------------------

function verdictOfPairing(p) {
  if (p.regression) return "regression";
  if ((p.ci && p.ci[0] > 0) || (p.fixed > p.regressed && p.mcnemar_p < 0.05)) return "improvement";
  return "no significant change";
}

async function comparePage() {
  const params = query();
  const ids = params.getAll("run");
  const start = Number(params.get("start") || 0);
  const ask = new URLSearchParams();
  for (const id of ids) ask.append("run", id);
  crumbs(el("a", { href: "/" }, "runs"), `compare ${ids.map((id) => `#${id}`).join(", ")}`);
  ask.set("start", String(start));
  ask.set("count", String(ROWS_PER_PAGE));
  const data = await api(`/api/compare?${ask}`);
  const label = (r, i) => `${i === 0 ? "base " : ""}#${r.id} ${r.target || ""}`.trim();
  const pairings = el("div", { class: "scroll" }, el("table", { id: "pairings" },
    el("thead", {}, el("tr", {}, el("th", {}, "run vs base"), el("th", { class: "num" }, "paired cases"),
      el("th", { class: "num" }, "stopped passing"), el("th", { class: "num" }, "started passing"), el("th", { class: "num" }, "McNemar p"),
      el("th", { class: "num" }, "mean: base → run"), el("th", { class: "num" }, "Δ mean [95% CI]"), el("th", {}, "verdict"))),
    el("tbody", {}, data.pairings.map((p, i) => el("tr", { class: p.regression ? "row-regressed" : null },
      el("td", {}, el("a", { href: `/run/${data.runs[i + 1].id}` }, label(data.runs[i + 1], i + 1))),
      el("td", { class: "num" }, p.cases), el("td", { class: "num" }, p.regressed), el("td", { class: "num" }, p.fixed),
      el("td", { class: "num" }, fixed(p.mcnemar_p, 4)),
      el("td", { class: "num" }, `${fixed(p.base_mean)} → ${fixed(p.mean)}`),
      el("td", { class: "num" }, `${fixed(p.mean_delta)}${interval(p.ci, fixed)}`),
      el("td", { class: "pair-verdict" }, verdictOfPairing(p)))))));
  const go = (at) => { const next = query(); next.set("start", String(at)); setQuery(next); route(); };
  const rows = el("div", { class: "scroll" }, el("table", { id: "compare-rows" },
    el("thead", {}, el("tr", {}, el("th", {}, "case"), data.runs.map((r, i) => el("th", {}, el("a", { href: `/run/${r.id}` }, label(r, i)))))),
    el("tbody", {}, data.rows.map((row) => el("tr", { class: row.regressed ? "row-regressed" : null, dataset: { id: row.id, regressed: row.regressed ? "1" : "0" } },
      el("td", { class: "id" }, row.id),
      row.cells.map((cell) => el("td", {}, cell ? [badge(cell.status), " ", fixed(cell.score)] : badge(null))))))));
  show(el("h1", {}, `Comparing ${data.runs.length} runs`),
    el("p", { id: "compare-summary", class: data.regressions ? "error-box" : "muted" },
      `${data.regressions} case(s) passed in the base and not in a later run; listed first.`),
    pairings, el("h2", {}, "Cases"), rows, pager(start, data.total, ROWS_PER_PAGE, go));
  ready();
}

// ---- an eval's history -----------------------------------------------------------------

function chart(points) {
  const width = 720, height = 220, pad = 30;
  const box = svg("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img" });
  const x = (i) => pad + (points.length > 1 ? (i * (width - 2 * pad)) / (points.length - 1) : (width - 2 * pad) / 2);
  const y = (v) => height - pad - v * (height - 2 * pad);
  box.appendChild(svg("line", { class: "axis", x1: pad, y1: y(0), x2: width - pad, y2: y(0) }));
  box.appendChild(svg("line", { class: "axis", x1: pad, y1: y(1), x2: width - pad, y2: y(1) }));
  for (const [value, text] of [[0, "0"], [1, "1"]]) {
    const label = svg("text", { x: 4, y: y(value) + 4 });
    label.textContent = text;
    box.appendChild(label);
  }
  for (const [key, cls] of [["mean_score", "mean"], ["pass_rate", "rate"]]) {
    const coords = points.map((p, i) => (typeof p[key] === "number" ? `${x(i)},${y(p[key])}` : null)).filter(Boolean);
    if (coords.length) box.appendChild(svg("polyline", { class: cls, points: coords.join(" ") }));
    points.forEach((p, i) => {
      if (typeof p[key] === "number") box.appendChild(svg("circle", { cx: x(i), cy: y(p[key]), r: 3, class: cls }));
    });
  }
  const title = svg("title", {});
  title.textContent = "mean score (solid) and pass rate (dashed) per run, oldest first";
  box.appendChild(title);
  return box;
}

async function historyPage() {
  const name = query().get("eval") || "";
  crumbs(el("a", { href: "/" }, "runs"), `history of ${name}`);
  const data = await api(`/api/history?eval=${encodeURIComponent(name)}`);
  const sections = data.series.map((s) => el("section", { class: "series", dataset: { target: s.target } },
    el("h2", {}, `target: ${s.target || "–"} (${s.points.length} runs)`),
    chart(s.points),
    el("p", { class: "muted" }, "solid: mean score · dashed: pass rate · oldest run on the left"),
    el("div", { class: "scroll" }, el("table", { class: "points" },
      el("thead", {}, el("tr", {}, el("th", {}, "run"), el("th", {}, "started"), el("th", {}, "verdict"),
        el("th", { class: "num" }, "mean"), el("th", { class: "num" }, "pass rate"), el("th", { class: "wide-only" }, "commit"))),
      el("tbody", {}, s.points.map((p) => el("tr", {},
        el("td", {}, el("a", { href: `/run/${p.id}` }, `#${p.id}`)), el("td", {}, p.started_at || "–"), el("td", {}, badge(p.verdict)),
        el("td", { class: "num" }, fixed(p.mean_score)), el("td", { class: "num" }, percent(p.pass_rate)),
        el("td", { class: "wide-only" }, p.git_commit ? p.git_commit.slice(0, 10) : ""))))))));
  show(el("h1", { id: "history" }, `History of ${name}`),
    sections.length ? sections : el("p", { class: "muted" }, "No runs of this eval in the index."));
  ready();
}

// ---- routing ---------------------------------------------------------------------------

async function route() {
  delete document.body.dataset.ready;
  const path = location.pathname;
  const run = /^\/run\/(\d+)$/.exec(path);
  try {
    if (run) await runPage(run[1]);
    else if (path === "/compare") await comparePage();
    else if (path === "/history") await historyPage();
    else await runList();
  } catch (err) {
    show(el("p", { class: "error-box", id: "load-error" }, `Could not load this page: ${err.message}`));
    ready();
  }
}

window.addEventListener("popstate", route);
document.addEventListener("DOMContentLoaded", route);
