/* rlvitals dashboard: the HTML report and the live page are this one app.
 *
 * The report embeds its data (script#rlv-data). The live page embeds the runs list and then
 * follows the server's events: "index" (the runs), "snapshot" (a whole run), "delta" (new
 * points of a run's series, its new report). Every piece of run text is put in the page with
 * textContent; nothing from a run is ever parsed as HTML.
 */
(function () {
  "use strict";
  var P = window.RLVPlot, fmt = P.fmt, num = P.num;
  var D = JSON.parse(document.getElementById("rlv-data").textContent);
  var LIVE = D.mode === "live";
  var SEV = {ok: 0, info: 1, warn: 2, fail: 3};
  var SEVCOLOR = {ok: "#2e7d32", info: "#1565c0", warn: "#b26a00", fail: "#c62828"};
  var state = {
    // Maps keyed by run text (metric names, run ids) have no prototype: a metric named
    // "__proto__" stays a metric.
    runs: Object.create(null), order: [], selected: [], cards: Object.create(null), es: null,
    connected: false, tview: {run: null, step: null}, tcache: Object.create(null),
    baseline: Object.assign(Object.create(null), D.baseline || {}), pending: false
  };

  function h(tag, cls, parent, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (parent) parent.appendChild(e);
    return e;
  }
  function ago(seconds) {
    if (!Number.isFinite(seconds)) return "never";
    seconds = Math.max(0, seconds);
    if (seconds < 90) return Math.round(seconds) + " s ago";
    if (seconds < 5400) return Math.round(seconds / 60) + " min ago";
    return (seconds / 3600).toFixed(1) + " h ago";
  }
  function globRe(p) {
    return new RegExp("^" + p.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*") + "$");
  }
  var PLOTS = D.plots.map(function (p) {
    return {id: p.id, title: p.title, help: p.help, log: p.log, refs: p.refs, metrics: p.metrics,
            match: p.metrics.map(function (m) { return m.indexOf("*") >= 0 ? globRe(m) : m; })};
  });
  function plotOf(name) {
    for (var i = 0; i < PLOTS.length; i++) {
      var ms = PLOTS[i].match;
      for (var k = 0; k < ms.length; k++) {
        if (typeof ms[k] === "string" ? ms[k] === name : ms[k].test(name)) return PLOTS[i].id;
      }
    }
    return null;
  }

  // -- data ---------------------------------------------------------------------------------
  var SUMMARY = ["name", "source", "format", "status", "stop_reason", "created", "last_step",
                 "last_time", "heartbeat", "verdict", "verdict_text", "worst", "findings"];
  function summary(r, s) { SUMMARY.forEach(function (k) { if (k in s) r[k] = s[k]; }); }
  function getRun(id) {
    var r = state.runs[id];
    if (!r) {
      r = state.runs[id] = {id: id, series: Object.create(null), transcripts: Object.create(null), transcript_steps: [], report: null,
                            info: {}, warnings: [], n_warnings: 0, loaded: false};
      state.order.push(id);
    }
    return r;
  }
  function setSeries(r, name, d) { r.series[name] = {s: d.s.slice(), v: d.v.map(num)}; }
  function ingest(run) {
    var r = getRun(run.id);
    summary(r, run);
    r.series = Object.create(null);
    Object.keys(run.series || {}).forEach(function (n) { setSeries(r, n, run.series[n]); });
    r.report = run.report || null;
    r.info = run.info || {};
    r.transcripts = Object.assign(Object.create(null), run.transcripts || {});
    r.transcript_steps = run.transcript_steps || [];
    r.warnings = run.warnings || [];
    r.n_warnings = run.n_warnings || 0;
    r.loaded = true;
    return r;
  }
  function applyDelta(ev) {
    var r = state.runs[ev.id];
    if (!r || !r.loaded) return [];
    summary(r, ev.summary || {});
    Object.keys(ev.series || {}).forEach(function (n) {
      var d = ev.series[n], cur = r.series[n];
      if (d.r || !cur) { setSeries(r, n, d); return; }
      for (var i = 0; i < d.s.length; i++) { cur.s.push(d.s[i]); cur.v.push(num(d.v[i])); }
    });
    var parts = ["runs", "verdicts", "plots"];
    if ("report" in ev) { r.report = ev.report; parts.push("findings", "transcripts"); }
    if ("transcript_steps" in ev) r.transcript_steps = ev.transcript_steps;
    if ("warnings" in ev) { r.warnings = ev.warnings; r.n_warnings = ev.n_warnings; parts.push("warnings"); }
    return state.selected.indexOf(ev.id) >= 0 ? parts : ["runs"];
  }

  // -- layout -------------------------------------------------------------------------------
  var app = document.getElementById("app");
  app.replaceChildren();
  var top = h("header", "top", app);
  h("span", "brand", top, "rlvitals");
  var subtitle = h("span", "subtitle", top);
  var liveStatus = h("span", "live-status", top);
  var main = h("main", null, app);
  var secRuns = h("section", "runs", main);
  h("h2", null, secRuns, "Runs");
  var runsTable = h("table", "runs-table", secRuns);
  var secVerdict = h("section", "verdicts", main);
  var secFindings = h("section", "findings", main);
  h("h2", null, secFindings, "Findings, worst first");
  var findingsBody = h("div", null, secFindings);
  var secPlots = h("section", "plots", main);
  h("h2", null, secPlots, "Dashboard");
  var plotsIntro = h("p", "muted", secPlots);
  var grid = h("div", "grid", secPlots);
  var notMeasured = h("p", "muted not-measured", secPlots);
  var secTr = h("section", "transcripts", main);
  secTr.id = "transcripts";
  h("h2", null, secTr, "Transcripts of flagged attempts");
  h("p", "muted", secTr, "The attempts of the updates the findings point at, flagged attempts " +
    "first, then highest reward (read these every few updates: reward can climb for the wrong " +
    "reasons). All transcript text is shown as plain text.");
  var trPicker = h("div", "tr-picker", secTr);
  var trBody = h("div", "tr-body", secTr);
  var secWarn = h("section", "warnings", main);
  var foot = h("footer", "muted", app, "rlvitals " + D.version);

  function sevBadge(sev, parent) {
    var b = h("span", "sev sev-" + (sev in SEV ? sev : "info"), parent, (sev || "?").toUpperCase());
    return b;
  }

  function renderHeader() {
    if (LIVE) {
      subtitle.textContent = "live dashboard · " + state.order.length + " run(s)";
      liveStatus.textContent = state.connected ? "● live" : "○ reconnecting…";
      liveStatus.className = "live-status " + (state.connected ? "on" : "off");
    } else {
      subtitle.textContent = "report · generated " + (D.generated || "") + " · " +
        state.order.length + " run(s)";
    }
  }

  // The runs table, the verdict cards and the liveness lines are kept and updated in place:
  // a live page gets an event per step, and rebuilding them each time made the browser lay out
  // and paint the whole page again. setText writes only what changed.
  function setText(el, text) {
    text = String(text);
    if (el.textContent !== text) el.textContent = text;
  }
  var runsBody = null, runRows = Object.create(null);
  function runRow(id) {
    var tr = h("tr");
    tr.dataset.run = id;
    var cb = h("input", null, h("td", null, tr));
    cb.type = "checkbox";
    cb.title = "show this run (several are overlaid)";
    cb.addEventListener("change", function () { toggleRun(id, cb.checked); });
    var row = {tr: tr, cb: cb, name: h("td", "name", tr), status: h("td", null, tr), verdict: h("td", null, tr),
               step: h("td", "num", tr), ago: h("td", "ago", tr), format: h("td", null, tr),
               source: h("td", "source", tr), vkey: null};
    return row;
  }
  function fillRow(row, r) {
    var sel = state.selected.indexOf(r.id) >= 0;
    if (row.tr.className !== (sel ? "sel" : "")) row.tr.className = sel ? "sel" : "";
    if (row.cb.checked !== sel) row.cb.checked = sel;
    setText(row.name, r.name || r.id);
    setText(row.status, r.status || "-");
    var vkey = r.verdict ? [r.worst, r.verdict_text, r.verdict].join("\u0000") : (LIVE && !r.loaded ? "load" : "-");
    if (row.vkey !== vkey) {
      row.vkey = vkey;
      row.verdict.replaceChildren();
      if (r.verdict) { sevBadge(r.worst, row.verdict); h("span", null, row.verdict, " " + (r.verdict_text || r.verdict)); }
      else h("span", "muted", row.verdict, LIVE && !r.loaded ? "(select to load)" : "-");
    }
    setText(row.step, r.last_step === null || r.last_step === undefined ? "-" : r.last_step);
    if (LIVE) {
      var t = r.last_time === null || r.last_time === undefined ? "" : String(r.last_time);
      if (row.ago.dataset.time !== t) row.ago.dataset.time = t;
      setText(row.ago, r.last_time ? ago(Date.now() / 1000 - r.last_time) : "-");
    } else {
      setText(row.ago, r.last_time ? when(r.last_time) : "-");
    }
    setText(row.format, r.format || "-");
    setText(row.source, r.source || "");
  }
  function renderRuns() {
    if (!runsBody) {
      var head = h("tr", null, h("thead", null, runsTable));
      ["", "run", "status", "verdict", "step", "last record", "format", "source"].forEach(function (t) {
        h("th", null, head, t);
      });
      runsBody = h("tbody", null, runsTable);
    }
    state.order.forEach(function (id, i) {
      var row = runRows[id] || (runRows[id] = runRow(id));
      fillRow(row, state.runs[id]);
      if (runsBody.children[i] !== row.tr) runsBody.insertBefore(row.tr, runsBody.children[i] || null);
    });
  }

  function selectedRuns() {
    return state.selected.map(function (id) { return state.runs[id]; })
      .filter(function (r) { return r && r.loaded; });
  }

  function when(t) {
    return new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
  }
  function liveness(r, el) {
    // [class, text] pieces; the element is rebuilt only when they change (each second's tick
    // and each step would otherwise replace it).
    var pieces = [];
    if (!LIVE || r.status && r.status !== "running") {
      // A report is read later, and a finished run has no pulse: say when, not how long ago.
      pieces.push(["", r.last_time ? "last step record at " + when(r.last_time) :
        r.last_step !== null && r.last_step !== undefined ? "step " + r.last_step + " read (this run records no times)" : "no step records"]);
    } else {
      var now = Date.now() / 1000;
      var hb = r.heartbeat, parts = [];
      if (r.last_time) parts.push("last step record " + ago(now - r.last_time));
      var hbt = hb && typeof hb.time === "number" ? hb.time : null;
      if (hbt && (!r.last_time || hbt > r.last_time)) {
        var what = "heartbeat " + ago(now - hbt) + ": " + (hb.phase || "working") + " step " + (hb.step === undefined ? "?" : hb.step);
        if (hb.attempts_needed) what += ", " + (hb.attempts_done || 0) + "/" + hb.attempts_needed + " attempts";
        parts.push(what);
      }
      if (!parts.length && r.last_step !== null && r.last_step !== undefined) parts.push("step " + r.last_step + " read (this run records no times)");
      var stall = D.stall_after || 600;
      var latest = Math.max(r.last_time || 0, hbt || 0);
      var stalled = r.status === "running" && latest && now - latest > stall;
      pieces.push([stalled ? "stalled" : "", parts.join(" · ") || "no step records yet"]);
      if (stalled) pieces.push(["stalled", " · stalled? nothing for " + ago(now - latest).replace(" ago", "")]);
    }
    var sig = JSON.stringify(pieces);
    if (el.rlvSig === sig) return;
    el.rlvSig = sig;
    el.replaceChildren();
    pieces.forEach(function (p) { h("span", p[0] || null, el, p[1]); });
  }

  function verdictCard(r, n) {
    var sev = r.worst || "ok";
    var card = h("div", "verdict-card sev-border-" + sev);
    card.dataset.run = r.id;
    var line = h("div", "verdict-line", card);
    sevBadge(sev, line);
    h("span", "verdict-text", line, r.verdict_text || r.verdict || "not judged yet");
    h("span", "verdict-run", line, r.name);
    var meta = h("div", "verdict-meta", card);
    var st = h("span", "last-step", meta);
    st.dataset.testid = "last-step";
    st.dataset.run = r.id;
    h("span", null, meta, " · " + (r.status || "status unknown") + (r.stop_reason ? " (" + r.stop_reason + ")" : ""));
    h("span", null, meta, " · " + n + " finding(s) to read");
    var lv = h("div", "liveness", card);
    lv.dataset.run = r.id;
    var info = r.info || {};
    var keys = Object.keys(info).filter(function (k) {
      return ["format", "name", "status", "stop_reason", "created", "run_id"].indexOf(k) < 0;
    });
    if (keys.length) {
      var det = h("details", "info", card);
      h("summary", null, det, "run info");
      var tb = h("table", "kv", det);
      keys.forEach(function (k) { kvRow(tb, k, info[k]); });
    }
    return {card: card, step: st, lv: lv};
  }

  // A card is rebuilt when its verdict, status, number of findings or info change; a new step
  // only rewrites its step and liveness line.
  var vcards = Object.create(null);
  function renderVerdicts() {
    var runs = selectedRuns(), want = [], keep = Object.create(null);
    runs.forEach(function (r) {
      var n = r.report ? r.report.findings.filter(function (f) { return f.severity !== "ok"; }).length : 0;
      var key = [r.worst, r.verdict_text, r.verdict, r.name, r.status, r.stop_reason, n].join("\u0000");
      var c = vcards[r.id];
      if (!c || c.key !== key || c.info !== r.info) {
        var was = c && c.card.querySelector("details.info");
        c = vcards[r.id] = verdictCard(r, n);
        c.key = key; c.info = r.info;
        var det = c.card.querySelector("details.info");
        if (was && det) det.open = was.open; // an opened "run info" stays open
      }
      setText(c.step, r.last_step === null || r.last_step === undefined ? "no steps" : "step " + r.last_step);
      liveness(r, c.lv);
      keep[r.id] = true;
      want.push(c.card);
    });
    Object.keys(vcards).forEach(function (id) { if (!keep[id]) delete vcards[id]; });
    if (!runs.length) {
      // A run ticked whose data has not arrived yet is loading, not unselected.
      var waiting = state.selected.filter(function (id) { return state.runs[id]; });
      var msg = waiting.length ? "Loading " + waiting.join(", ") + "…"
        : state.order.length ? "Select a run above." : "No runs yet: waiting for run directories to appear.";
      var cur = secVerdict.firstElementChild;
      if (!(secVerdict.children.length === 1 && cur.tagName === "P" && cur.textContent === msg)) {
        secVerdict.replaceChildren(h("p", "muted", null, msg));
      }
      return;
    }
    var same = secVerdict.children.length === want.length;
    for (var i = 0; same && i < want.length; i++) same = secVerdict.children[i] === want[i];
    if (!same) secVerdict.replaceChildren.apply(secVerdict, want);
  }

  function valueText(v) {
    if (v === null || v === undefined) return "-";
    if (typeof v === "number") return fmt(v);
    if (typeof v === "string") return ["NaN", "Infinity", "-Infinity"].indexOf(v) >= 0 ? fmt(num(v)) : v;
    if (Array.isArray(v) && v.every(function (x) { return typeof x === "number" || typeof x === "string"; })) {
      var head = v.slice(0, 12).map(function (x) { return typeof x === "number" ? fmt(x) : String(x); });
      return "[" + head.join(", ") + (v.length > 12 ? ", … (" + v.length + " in all)" : "") + "]";
    }
    var s = JSON.stringify(v);
    return s.length > 400 ? s.slice(0, 400) + "…" : s;
  }
  function kvRow(tb, k, v) {
    var tr = h("tr", null, tb);
    h("th", null, tr, k);
    // a z-score of a noiseless line is infinite: no number to print
    var exact = /(^|_)z(_|$)/.test(k) && (v === "Infinity" || v === "-Infinity");
    h("td", null, tr, exact ? "exact (no noise)" : valueText(v));
  }

  function tsteps(r) { return (r.transcript_steps || []).map(function (t) { return t.step; }); }
  function nearestTranscript(r, step) {
    var steps = tsteps(r).sort(function (a, b) { return a - b; });
    for (var i = 0; i < steps.length; i++) if (steps[i] >= step) return steps[i];
    return steps.length ? steps[steps.length - 1] : null;
  }

  function renderFindings() {
    findingsBody.replaceChildren();
    var runs = selectedRuns();
    runs.forEach(function (r) {
      if (runs.length > 1) h("h3", null, findingsBody, r.name);
      if (!r.report) { h("p", "muted", findingsBody, "Not judged yet."); return; }
      var list = h("ol", "finding-list", findingsBody);
      if (!r.report.findings.length) h("li", "muted", list, "No findings.");
      r.report.findings.forEach(function (f, i) {
        var li = h("li", "finding sev-border-" + f.severity + (f.severity === "ok" ? " quiet" : ""), list);
        li.dataset.finding = r.id + ":" + i;
        var head = h("div", "finding-head", li);
        sevBadge(f.severity, head);
        h("span", "finding-title", head, f.title);
        var meta = h("div", "finding-meta", li);
        var bits = [f.check, D.verdicts[f.verdict] || f.verdict];
        if (f.metric) bits.push(f.metric);
        if (f.first_step !== null && f.first_step !== undefined) bits.push("from step " + f.first_step);
        h("span", null, meta, bits.join(" · "));
        if (f.action) h("div", "finding-action", li, "→ " + f.action);
        var ev = f.evidence || {};
        if (f.detail || Object.keys(ev).length) {
          var det = h("details", null, li);
          h("summary", null, det, "evidence");
          if (f.detail) h("p", null, det, f.detail);
          var tb = h("table", "kv", det);
          Object.keys(ev).forEach(function (k) { kvRow(tb, k, ev[k]); });
        }
        var acts = h("div", "finding-actions", li);
        if (f.severity !== "ok" && f.first_step !== null && f.first_step !== undefined) {
          var show = h("button", "link", acts, "show on plot");
          show.type = "button";
          show.addEventListener("click", function () { flashMark(r.id + ":" + i); });
          var ts = nearestTranscript(r, f.first_step);
          if (ts !== null) {
            var tbtn = h("button", "link", acts, "transcripts at step " + ts);
            tbtn.type = "button";
            tbtn.addEventListener("click", function () { openTranscripts(r.id, ts); });
          }
        }
      });
    });
  }

  // A click on a finding's mark on a curve opens the transcripts of its step, the samples
  // the finding cites first (flagged), so a spike is one click from what it flagged.
  function openMark(mk) {
    if (mk.run && mk.tstep !== null && mk.tstep !== undefined) openTranscripts(mk.run, mk.tstep);
  }

  function flashMark(fid) {
    var marks = document.querySelectorAll("g.mark");
    var hit = null;
    marks.forEach(function (m) { if (m.dataset.finding === fid) { hit = m; } });
    if (!hit) return;
    var card = hit.closest(".plot-card");
    if (card) card.scrollIntoView({behavior: "smooth", block: "center"});
    hit.classList.remove("flash");
    void hit.getBoundingClientRect();
    hit.classList.add("flash");
  }

  // -- plots --------------------------------------------------------------------------------
  function plotSpecs(runs) {
    var specs = PLOTS.map(function (p) { return {p: p, lines: [], marks: [], bands: [], metrics: []}; });
    var byId = Object.create(null);
    specs.forEach(function (s) { byId[s.p.id] = s; });
    var other = {p: {id: "other", title: "Other flagged metrics", help: "Metrics findings name that no plot above draws.", log: false, refs: []},
                 lines: [], marks: [], bands: [], metrics: []};
    byId.other = other;
    var multi = runs.length > 1;
    var flagged = Object.create(null);
    runs.forEach(function (r) {
      (r.report ? r.report.findings : []).forEach(function (f) { if (f.metric) flagged[f.metric] = true; });
    });
    runs.forEach(function (r, ri) {
      Object.keys(r.series).sort().forEach(function (name) {
        var pid = plotOf(name);
        if (pid === null) { if (!flagged[name]) return; pid = "other"; }
        var s = byId[pid];
        if (s.metrics.indexOf(name) < 0) s.metrics.push(name);
        var mi = s.metrics.indexOf(name);
        var color = multi ? P.PALETTE[ri % P.PALETTE.length] : P.PALETTE[mi % P.PALETTE.length];
        var dash = multi ? P.DASHES[mi % P.DASHES.length] : "";
        s.lines.push({key: r.id + "|" + name, label: (multi ? r.name + " · " : "") + name, color: color, dash: dash,
                      steps: r.series[name].s, values: r.series[name].v, dots: /^eval\//.test(name)});
      });
    });
    var all = specs.concat([other]);
    // baseline ranges, once per metric
    all.forEach(function (s) {
      s.metrics.forEach(function (name) {
        var b = state.baseline[name];
        if (!b) return;
        s.bands.push({x0: null, x1: b.until === null || b.until === undefined ? null : b.until, y0: b.lo, y1: b.hi,
                      label: "healthy range of " + name + ": " + fmt(b.lo) + " to " + fmt(b.hi) +
                             (b.until !== null && b.until !== undefined ? " over steps 0 to " + b.until : "") +
                             (b.mean_lo !== null && b.mean_lo !== undefined ? "; per-run means " + fmt(b.mean_lo) + " to " + fmt(b.mean_hi) : "")});
      });
    });
    var anchor = all.filter(function (s) { return s.lines.length; })[0];
    runs.forEach(function (r) {
      (r.report ? r.report.findings : []).forEach(function (f, i) {
        if (f.severity === "ok" || f.first_step === null || f.first_step === undefined) return;
        var target = null;
        if (f.metric && r.series[f.metric]) target = byId[plotOf(f.metric) || "other"];
        if (!target || !target.lines.length) target = anchor;
        if (!target) return;
        target.marks.push({x: f.first_step, color: SEVCOLOR[f.severity] || "#555", id: r.id + ":" + i,
                           run: r.id, tstep: nearestTranscript(r, f.first_step),
                           label: (multi ? r.name + ": " : "") + f.severity.toUpperCase() + " " + f.title +
                                  " (" + f.check + ", step " + f.first_step + ")"});
      });
    });
    return all;
  }

  // A live page redraws only the plots on screen; the others catch up when scrolled to.
  var watcher = LIVE && "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (e) {
      var c = state.cards[e.target.dataset.plotId];
      if (!c) return;
      c.visible = e.isIntersecting;
      if (c.visible && c.stale && c.plot) { c.plot.update(c.stale); c.stale = null; }
    });
  }, {rootMargin: "200px"}) : null;

  function renderPlots() {
    var runs = selectedRuns();
    var specs = plotSpecs(runs);
    var shown = specs.filter(function (s) { return s.lines.length; });
    var missing = specs.filter(function (s) { return !s.lines.length && s.p.id !== "other"; });
    plotsIntro.textContent = runs.length > 1
      ? "Runs overlaid: one colour per run, one dash per metric. Flags mark where each finding was first seen; shaded: healthy range from the baseline."
      : "Flags mark where each finding was first seen; shaded: healthy range from the baseline (when given). Click a legend entry to hide a series.";
    var keep = Object.create(null);
    shown.forEach(function (s) {
      keep[s.p.id] = true;
      var c = state.cards[s.p.id];
      if (!c) {
        var card = h("div", "plot-card");
        card.dataset.plot = s.p.id;
        var hd = h("div", "plot-head", card);
        h("h3", null, hd, s.p.title);
        var help = h("p", "plot-help", card, s.p.help);
        var host = h("div", "plot-host", card);
        c = state.cards[s.p.id] = {card: card, host: host, help: help, plot: null, visible: true, stale: null};
        if (watcher) { card.dataset.plotId = s.p.id; watcher.observe(card); }
      }
      grid.appendChild(c.card);
      var opts = {lines: s.lines, marks: s.marks, bands: s.bands, refs: s.p.refs || [], log: s.p.log, title: s.p.title,
                  onMark: openMark};
      if (!c.plot) c.plot = new P.Plot(c.host, opts);
      else if (c.visible || !watcher) c.plot.update(opts);
      else c.stale = opts; // off screen: drawn when scrolled into view
    });
    Object.keys(state.cards).forEach(function (id) {
      if (!keep[id]) {
        if (watcher) watcher.unobserve(state.cards[id].card);
        state.cards[id].card.remove();
        delete state.cards[id];
      }
    });
    if (!runs.length) { notMeasured.textContent = ""; return; }
    notMeasured.textContent = missing.length
      ? "Not measured in " + (runs.length > 1 ? "these runs" : "this run") + ": " + missing.map(function (s) {
          return s.p.title + " (" + s.p.metrics.join(", ") + ")";
        }).join("; ") + "."
      : "";
  }

  // -- transcripts --------------------------------------------------------------------------
  function openTranscripts(runId, step) {
    state.tview = {run: runId, step: step};
    renderTranscripts();
    secTr.scrollIntoView({behavior: "smooth", block: "start"});
  }

  function transcriptsFor(r, step, done) {
    var key = String(step);
    if (r.transcripts[key]) { done(r.transcripts[key]); return; }
    if (!LIVE) { done(null); return; }
    var ck = r.id + "|" + key;
    if (state.tcache[ck]) { done(state.tcache[ck]); return; }
    fetch("api/transcripts/" + encodeURIComponent(r.id) + "/" + encodeURIComponent(key))
      .then(function (res) { return res.ok ? res.json() : null; })
      .then(function (data) { if (data) state.tcache[ck] = data; done(data); })
      .catch(function () { done(null); });
  }

  function renderTranscripts() {
    trPicker.replaceChildren();
    var runs = selectedRuns().filter(function (r) { return tsteps(r).length; });
    if (!runs.length) {
      trBody.replaceChildren();
      h("p", "muted", trBody, "No transcripts for the steps the findings point at (the run writes them with [output] trace = \"full\" or \"samples\").");
      return;
    }
    var tv = state.tview;
    if (!tv.run || !state.runs[tv.run] || runs.indexOf(state.runs[tv.run]) < 0) tv = state.tview = {run: runs[0].id, step: null};
    var r = state.runs[tv.run];
    if (tv.step === null || tsteps(r).indexOf(tv.step) < 0) tv.step = tsteps(r)[0];
    runs.forEach(function (rr) {
      var row = h("div", "tr-row", trPicker);
      if (runs.length > 1) h("span", "tr-run", row, rr.name + ": ");
      rr.transcript_steps.forEach(function (t) {
        var s = t.step;
        var b = h("button", "chip" + (rr.id === tv.run && s === tv.step ? " on" : "") + (t.why && t.why.indexOf("latest") !== 0 ? " flag" : ""), row, "step " + s);
        b.title = t.why || "";
        b.type = "button";
        b.addEventListener("click", function () { openTranscripts(rr.id, s); });
      });
    });
    var want = tv.run + "|" + tv.step;
    trBody.dataset.showing = want;
    transcriptsFor(r, tv.step, function (entries) {
      if (trBody.dataset.showing !== want) return;
      trBody.replaceChildren();
      if (!entries) { h("p", "muted", trBody, "No transcript file for step " + tv.step + "."); return; }
      if (!entries.length) { h("p", "muted", trBody, "Step " + tv.step + " has no attempts."); return; }
      var why = (r.transcript_steps.filter(function (t) { return t.step === tv.step; })[0] || {}).why;
      h("p", "muted", trBody, "Step " + tv.step + (why ? " (" + why + ")" : "") + ": showing " + entries.length + " of " + (entries[0].of || entries.length) + " attempts.");
      entries.forEach(function (e, i) { renderAttempt(e, i === 0); });
    });
  }

  function renderText(parent, label, v) {
    if (v === undefined || v === null) return;
    h("div", "tr-label", parent, label);
    if (typeof v === "string") { h("pre", "tr-text", parent, v); return; }
    if (Array.isArray(v)) {
      v.forEach(function (msg) {
        if (msg && typeof msg === "object" && "content" in msg) {
          var box = h("div", "tr-msg", parent);
          h("div", "tr-role", box, String(msg.role || "message"));
          var c = msg.content;
          if (Array.isArray(c)) c = c.map(function (part) { return part && typeof part === "object" && "text" in part ? String(part.text) : JSON.stringify(part); }).join("\n");
          h("pre", "tr-text", box, typeof c === "string" ? c : JSON.stringify(c, null, 2));
        } else {
          h("pre", "tr-text", parent, typeof msg === "string" ? msg : JSON.stringify(msg, null, 2));
        }
      });
      return;
    }
    h("pre", "tr-text", parent, JSON.stringify(v, null, 2));
  }

  function renderAttempt(e, open) {
    var det = h("details", "attempt" + (e.flagged ? " flagged" : ""), trBody);
    det.open = open;
    var bits = ["attempt " + e.attempt_id, "task " + e.task_id, "group " + e.group_id,
                "reward " + valueText(e.reward), e.trained ? "trained" : "not trained"];
    if (e.flagged) bits.push(e.flags && e.flags.length ? "flagged: " + e.flags.join(", ") : "flagged");
    h("summary", null, det, bits.join(" · "));
    var gens = Array.isArray(e.generations) ? e.generations : [];
    if (!gens.length) h("p", "muted", det, "No generations recorded.");
    gens.forEach(function (g, gi) {
      var box = h("div", "gen", det);
      var meta = ["generation " + (gi + 1)];
      if (g.policy_version !== undefined) meta.push("policy version " + valueText(g.policy_version));
      if (g.finish_reason) meta.push("finished: " + g.finish_reason);
      if (g.prompt_tokens !== undefined) meta.push(valueText(g.prompt_tokens) + " prompt tokens");
      if (g.completion_tokens !== undefined) meta.push(valueText(g.completion_tokens) + " completion tokens");
      if (g.trains !== undefined) meta.push(g.trains ? "trains" : "does not train");
      h("div", "gen-meta", box, meta.join(" · "));
      if (!("prompt" in g) && !("completion" in g)) h("p", "muted", box, "trace = \"samples\": identity and lengths only, no text.");
      renderText(box, "prompt", g.prompt);
      renderText(box, "completion", g.completion);
    });
  }

  function renderWarnings() {
    secWarn.replaceChildren();
    var runs = selectedRuns().filter(function (r) { return r.n_warnings; });
    if (!runs.length) return;
    var det = h("details", null, secWarn);
    h("summary", null, det, "Reader warnings (" + runs.reduce(function (a, r) { return a + r.n_warnings; }, 0) + ")");
    runs.forEach(function (r) {
      var ul = h("ul", "mono", det);
      r.warnings.forEach(function (w) { h("li", null, ul, w); });
      if (r.n_warnings > r.warnings.length) h("li", "muted", ul, "… and " + (r.n_warnings - r.warnings.length) + " more");
    });
  }

  // What needs drawing again: a new step redraws the plots, the runs and the verdict cards;
  // the findings and the transcript viewer change only with a new report or selection.
  var ALL = ["runs", "verdicts", "findings", "plots", "transcripts", "warnings"];
  var dirty = {};
  function renderAll() {
    ALL.forEach(function (k) { dirty[k] = true; });
    renderDirty();
  }
  function renderDirty() {
    state.pending = false;
    renderHeader();
    if (dirty.runs) renderRuns();
    if (dirty.verdicts) renderVerdicts();
    if (dirty.findings) renderFindings();
    if (dirty.plots) renderPlots();
    if (dirty.transcripts) renderTranscripts();
    if (dirty.warnings) renderWarnings();
    dirty = {};
  }
  // Events are applied to the data as they come and drawn once per animation frame: the
  // frame after the first event since the last drawing, with everything that came meanwhile
  // (a hidden tab draws nothing until it is shown again).
  var frame = window.requestAnimationFrame ? window.requestAnimationFrame.bind(window)
    : function (f) { setTimeout(f, 16); };
  function schedule(parts) {
    (parts || ALL).forEach(function (k) { dirty[k] = true; });
    if (state.pending) return;
    state.pending = true;
    frame(renderDirty);
  }

  // -- selection and live updates -----------------------------------------------------------
  function saveSelection() {
    if (LIVE) history.replaceState(null, "", "#runs=" + state.selected.map(encodeURIComponent).join(","));
  }
  function toggleRun(id, on) {
    var i = state.selected.indexOf(id);
    if (on && i < 0) state.selected.push(id);
    if (!on && i >= 0) state.selected.splice(i, 1);
    saveSelection();
    if (LIVE) connect();
    renderAll();
  }

  function defaultSelection() {
    if (state.selected.length || !state.order.length) return;
    var running = state.order.filter(function (id) { return state.runs[id].status === "running"; });
    state.selected = [running.length ? running[running.length - 1] : state.order[state.order.length - 1]];
  }

  function onIndex(runs) {
    runs.forEach(function (s) { summary(getRun(s.id), s); });
    var before = state.selected.length;
    defaultSelection();
    if (state.selected.length !== before) { connect(); schedule(); } else schedule(["runs"]);
  }

  function connect() {
    if (state.es) state.es.close();
    var url = "events?runs=" + encodeURIComponent(state.selected.join(","));
    var es = state.es = new EventSource(url);
    es.addEventListener("open", function () { state.connected = true; renderHeader(); });
    es.addEventListener("error", function () { state.connected = false; renderHeader(); });
    es.addEventListener("index", function (m) { onIndex(JSON.parse(m.data).runs); });
    es.addEventListener("snapshot", function (m) { ingest(JSON.parse(m.data)); schedule(); });
    es.addEventListener("delta", function (m) { schedule(applyDelta(JSON.parse(m.data))); });
  }

  function tick() {
    var now = Date.now() / 1000;
    document.querySelectorAll("td.ago").forEach(function (td) {
      if (td.dataset.time) setText(td, ago(now - Number(td.dataset.time)));
    });
    document.querySelectorAll("div.liveness").forEach(function (el) {
      var r = state.runs[el.dataset.run];
      if (r) liveness(r, el);
    });
  }

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      Object.keys(state.cards).forEach(function (id) { var c = state.cards[id]; if (c.plot) c.plot.resize(); });
    }, 150);
  });

  if (LIVE) {
    var m = /^#runs=(.*)$/.exec(location.hash);
    (D.index || []).forEach(function (s) { summary(getRun(s.id), s); });
    if (m && m[1]) {
      state.selected = m[1].split(",").map(function (x) {
        try { return decodeURIComponent(x); } catch (e) { return ""; }
      }).filter(function (id) { return id in state.runs; });
    }
    defaultSelection();
    renderAll();
    connect();
    setInterval(tick, 1000);
  } else {
    (D.runs || []).forEach(ingest);
    state.selected = state.order.slice();
    renderAll();
  }
  window.RLV = {state: state, render: renderAll};
})();
