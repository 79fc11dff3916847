/* rlvitals plot: a small SVG line chart with no dependencies (inline in every page).
 *
 *   const p = new RLVPlot.Plot(container, {lines, bands, refs, marks, log});
 *   p.update(newOptions);
 *
 * lines: [{key, label, color, dash, steps: [int], values: [number incl. NaN/±Infinity], dots}]
 * bands: [{x0, x1, y0, y1, label}]  healthy ranges (x0/x1 null = plot edge)
 * refs:  [{y, label}]               horizontal reference lines
 * marks: [{x, color, label, id}]    findings, drawn as flagged vertical lines
 * onMark: function (mark)          called on a click at a mark (within 6 px of its line)
 *
 * Series are sparse (a metric has values only where measured); measured non-finite values are
 * drawn as markers at the plot edge (× NaN, ▲ +inf, ▼ -inf) and break the line. Long series
 * are reduced to min/max per pixel column before drawing. All text goes in as textContent.
 */
(function (global) {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                 "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
  var DASHES = ["", "6 3", "2 3", "9 3 2 3", "4 4", "1 2"];

  function svg(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    if (attrs) for (var k in attrs) if (attrs[k] !== null && attrs[k] !== undefined) e.setAttribute(k, String(attrs[k]));
    if (parent) parent.appendChild(e);
    return e;
  }
  function html(tag, cls, parent, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (parent) parent.appendChild(e);
    return e;
  }
  /* A JSON value as a number: our files spell non-finite numbers as strings. */
  function num(v) {
    if (typeof v === "number") return v;
    if (v === "NaN") return NaN;
    if (v === "Infinity") return Infinity;
    if (v === "-Infinity") return -Infinity;
    return NaN;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "-";
    if (Number.isNaN(v)) return "NaN";
    if (v === Infinity) return "inf";
    if (v === -Infinity) return "-inf";
    if (v === 0) return "0";
    var a = Math.abs(v);
    if (Number.isInteger(v) && a < 1e9) return String(v);
    if (a >= 1e5 || a < 1e-3) return v.toExponential(2);
    return String(Number(v.toPrecision(4)));
  }
  /* Labels for axis ticks: as fmt writes them, with more digits until distinct ticks read
     distinct (ticks 0.99975 and 0.9998 both read 0.9998 at fmt's four digits). */
  function tickLabels(ticks) {
    var out = ticks.map(fmt);
    for (var p = 5; p <= 15 && !distinctText(out); p++) {
      out = ticks.map(function (t) {
        var a = Math.abs(t);
        if (t === 0 || !isFinite(t) || (Number.isInteger(t) && a < 1e9)) return fmt(t);
        if (a >= 1e5 || a < 1e-3) return t.toExponential(p - 2);
        return String(Number(t.toPrecision(p)));
      });
    }
    return out;
  }
  function distinctText(xs) {
    var seen = {};
    for (var i = 0; i < xs.length; i++) {
      if (seen[xs[i]]) return false;
      seen[xs[i]] = true;
    }
    return true;
  }
  function niceStep(span, n) {
    var raw = span / Math.max(1, n);
    var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  }
  function linearTicks(lo, hi, n) {
    if (!(hi > lo)) return [lo];
    var step = niceStep(hi - lo, n), out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
      out.push(Math.abs(t) < step * 1e-9 ? 0 : Number(t.toPrecision(12)));
    }
    return out;
  }
  function logTicks(lo, hi) {
    if (Math.log10(hi) - Math.log10(lo) < 0.7) {
      // Less than a decade: decades would leave the axis bare, so use plain nice ticks.
      return linearTicks(lo, hi, 4).filter(function (t) { return t > 0; });
    }
    var a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi)), out = [];
    var mults = b - a <= 2 ? [1, 2, 5] : [1];
    var every = Math.max(1, Math.ceil((b - a) / 6));
    for (var e = a; e <= b; e += every) {
      for (var i = 0; i < mults.length; i++) {
        var t = mults[i] * Math.pow(10, e);
        if (t >= lo * 0.999 && t <= hi * 1.001) out.push(t);
      }
    }
    return out;
  }
  /* Index of the first step >= x (steps ascending). */
  function lowerBound(steps, x) {
    var lo = 0, hi = steps.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (steps[mid] < x) lo = mid + 1; else hi = mid; }
    return lo;
  }
  /* Indices to draw: every point when few, else first/min/max/last of each pixel column. */
  function decimate(steps, values, i0, i1, xpix, columns) {
    var n = i1 - i0, out = [];
    if (n <= columns * 4) { for (var i = i0; i < i1; i++) out.push(i); return out; }
    var col = null, first = -1, last = -1, imin = -1, imax = -1;
    function flush() {
      if (first < 0) return;
      var pts = [first, imin, imax, last].filter(function (v, k, arr) { return v >= 0 && arr.indexOf(v) === k; });
      pts.sort(function (a, b) { return a - b; });
      for (var k = 0; k < pts.length; k++) out.push(pts[k]);
    }
    for (var j = i0; j < i1; j++) {
      var c = Math.floor(xpix(steps[j]));
      var v = values[j];
      if (c !== col) { flush(); col = c; first = j; imin = -1; imax = -1; }
      if (!Number.isFinite(v)) { out.push(j); continue; } // non-finite points are always kept
      if (imin < 0 || v < values[imin]) imin = j;
      if (imax < 0 || v > values[imax]) imax = j;
      last = j;
    }
    flush();
    out.sort(function (a, b) { return a - b; });
    return out;
  }

  function Plot(container, opts) {
    this.container = container;
    this.hidden = Object.create(null);
    this.root = html("div", "rlv-plot", container);
    this.svgHost = html("div", "rlv-plot-svg", this.root);
    this.tip = html("div", "rlv-tip", this.root);
    this.tip.hidden = true;
    this.legend = html("div", "rlv-legend", this.root);
    this.note = html("div", "rlv-plot-note", this.root);
    this.opts = opts || {};
    this.render();
  }
  Plot.prototype.update = function (opts) { this.opts = opts; this.render(); };
  /* Measure the container again (after a resize); render() reuses the last measure so that
   * redrawing many plots does not force a layout per plot. */
  Plot.prototype.resize = function () { this.width = null; this.render(); };
  Plot.prototype.visibleLines = function () {
    var hidden = this.hidden;
    return (this.opts.lines || []).filter(function (l) { return !hidden[l.key]; });
  };
  Plot.prototype.render = function () {
    var o = this.opts, self = this;
    if (!this.width) this.width = Math.max(260, Math.floor(this.container.clientWidth || 480));
    var W = this.width;
    var H = o.height || 210;
    var m = {l: 54, r: 14, t: 12, b: 24};
    var pw = W - m.l - m.r, ph = H - m.t - m.b;
    var lines = this.visibleLines();
    var log = !!o.log;

    // x range over every line (hidden ones too, so toggling keeps the axis), marks included.
    var x0 = Infinity, x1 = -Infinity;
    (o.lines || []).forEach(function (l) {
      if (l.steps.length) { x0 = Math.min(x0, l.steps[0]); x1 = Math.max(x1, l.steps[l.steps.length - 1]); }
    });
    (o.marks || []).forEach(function (mk) { if (Number.isFinite(mk.x)) { x0 = Math.min(x0, mk.x); x1 = Math.max(x1, mk.x); } });
    if (!(x1 >= x0)) { x0 = 0; x1 = 1; }
    if (x1 === x0) { x0 -= 1; x1 += 1; }

    // y range over the finite (and, on a log axis, positive) values of the visible lines.
    var y0 = Infinity, y1 = -Infinity, dropped = 0;
    lines.forEach(function (l) {
      for (var i = 0; i < l.values.length; i++) {
        var v = l.values[i];
        if (!Number.isFinite(v)) continue;
        if (log && v <= 0) { dropped++; continue; }
        if (v < y0) y0 = v;
        if (v > y1) y1 = v;
      }
    });
    var hasData = y1 >= y0;
    if (!hasData) { y0 = log ? 0.1 : 0; y1 = log ? 10 : 1; }
    (o.bands || []).forEach(function (b) {
      if (log && (b.y0 <= 0 || b.y1 <= 0)) return;
      y0 = Math.min(y0, b.y0); y1 = Math.max(y1, b.y1);
    });
    var span0 = y1 - y0;
    (o.refs || []).forEach(function (r) {
      if (log ? (r.y > 0 && r.y < y1 * 100 && r.y > y0 / 100) : (r.y >= y0 - span0 * 0.6 && r.y <= y1 + span0 * 0.6)) {
        y0 = Math.min(y0, r.y); y1 = Math.max(y1, r.y);
      }
    });
    var ly0, ly1;
    if (log) {
      ly0 = Math.log10(y0); ly1 = Math.log10(y1);
      if (ly1 - ly0 < 1e-9) { ly0 -= 0.5; ly1 += 0.5; }
      var lpad = (ly1 - ly0) * 0.06; ly0 -= lpad; ly1 += lpad;
      y0 = Math.pow(10, ly0); y1 = Math.pow(10, ly1);
    } else {
      if (y1 - y0 < 1e-12) {
        // A constant series: centre it, except a constant 0 (a rate, a count) sits on 0..1.
        if (y0 === 0) { y1 = 1; } else { var d = Math.abs(y0) * 0.1; y0 -= d; y1 += d; }
      }
      var pad = (y1 - y0) * 0.06; y0 -= pad; y1 += pad;
    }
    function X(s) { return m.l + (s - x0) / (x1 - x0) * pw; }
    function Y(v) {
      var f = log ? (Math.log10(v) - ly0) / (ly1 - ly0) : (v - y0) / (y1 - y0);
      return m.t + (1 - f) * ph;
    }
    this.X = X; this.W = W; this.x0 = x0; this.x1 = x1; this.m = m; this.pw = pw;

    var root = svg("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, "class": "rlv-chart",
                           role: "img"});
    if (o.title) svg("title", null, root).textContent = o.title;
    var clipId = "clip" + Math.random().toString(36).slice(2);
    var defs = svg("defs", null, root);
    svg("rect", {x: m.l, y: m.t, width: pw, height: ph}, svg("clipPath", {id: clipId}, defs));

    // grid and axes
    var g = svg("g", {"class": "rlv-axes"}, root);
    var yt = log ? logTicks(y0, y1) : linearTicks(y0, y1, 5);
    var ylabels = tickLabels(yt);
    yt.forEach(function (t, i) {
      var y = Y(t);
      svg("line", {x1: m.l, x2: m.l + pw, y1: y, y2: y, "class": "grid"}, g);
      svg("text", {x: m.l - 5, y: y + 3.5, "text-anchor": "end"}, g).textContent = ylabels[i];
    });
    linearTicks(x0, x1, Math.max(2, Math.floor(pw / 80))).forEach(function (t) {
      if (t !== Math.round(t)) return;
      var x = X(t);
      svg("line", {x1: x, x2: x, y1: m.t + ph, y2: m.t + ph + 4, "class": "tick"}, g);
      svg("text", {x: x, y: H - 6, "text-anchor": "middle"}, g).textContent = fmt(t);
    });
    svg("rect", {x: m.l, y: m.t, width: pw, height: ph, "class": "frame"}, g);

    var body = svg("g", {"clip-path": "url(#" + clipId + ")"}, root);
    // healthy ranges
    (o.bands || []).forEach(function (b) {
      if (log && (b.y0 <= 0 || b.y1 <= 0)) return;
      var bx0 = b.x0 === null || b.x0 === undefined ? x0 : b.x0;
      var bx1 = b.x1 === null || b.x1 === undefined ? x1 : b.x1;
      var r = svg("rect", {x: X(bx0), y: Y(b.y1), width: Math.max(1, X(bx1) - X(bx0)),
                           height: Math.max(1, Y(b.y0) - Y(b.y1)), "class": "band",
                           fill: b.color || "#2ca02c"}, body);
      svg("title", null, r).textContent = b.label || "healthy range";
    });
    (o.refs || []).forEach(function (r) {
      if (log && r.y <= 0) return;
      var y = Y(r.y);
      if (y < m.t || y > m.t + ph) return;
      svg("line", {x1: m.l, x2: m.l + pw, y1: y, y2: y, "class": "ref"}, body);
      svg("text", {x: m.l + pw - 3, y: y - 3, "text-anchor": "end", "class": "ref-label"}, body).textContent = r.label;
    });

    // lines
    var npts = 0, lastStep = null;
    lines.forEach(function (l) {
      var i0 = 0, i1 = l.steps.length;
      var idx = decimate(l.steps, l.values, i0, i1, X, pw);
      var d = [], pen = false, marks = [];
      for (var k = 0; k < idx.length; k++) {
        var i = idx[k], s = l.steps[i], v = l.values[i];
        if (!Number.isFinite(v)) { marks.push([s, v]); pen = false; continue; }
        if (log && v <= 0) { pen = false; continue; }
        d.push((pen ? "L" : "M") + X(s).toFixed(1) + " " + Y(v).toFixed(1));
        pen = true;
      }
      npts += l.steps.length;
      if (l.steps.length) lastStep = Math.max(lastStep === null ? -Infinity : lastStep, l.steps[l.steps.length - 1]);
      var path = svg("path", {d: d.join(""), "class": "line", stroke: l.color, "stroke-dasharray": l.dash || null,
                              fill: "none"}, body);
      path.dataset.key = l.key;
      if (l.dots || idx.length <= 60) {
        idx.forEach(function (i) {
          var v = l.values[i];
          if (!Number.isFinite(v) || (log && v <= 0)) return;
          svg("circle", {cx: X(l.steps[i]).toFixed(1), cy: Y(v).toFixed(1), r: l.dots ? 3 : 2, fill: l.color, "class": "dot"}, body);
        });
      }
      marks.forEach(function (p) {
        var x = X(p[0]), y, shape;
        if (p[1] === -Infinity) { y = m.t + ph - 4; shape = "M" + (x - 4) + " " + (y - 4) + "h8l-4 7z"; }
        else if (p[1] === Infinity) { y = m.t + 4; shape = "M" + (x - 4) + " " + (y + 4) + "h8l-4 -7z"; }
        else { y = m.t + 5; shape = "M" + (x - 4) + " " + (y - 4) + "l8 8M" + (x + 4) + " " + (y - 4) + "l-8 8"; }
        var e = svg("path", {d: shape, "class": "nonfinite", stroke: "#c62828", fill: "#c62828"}, root);
        svg("title", null, e).textContent = l.label + ": " + fmt(p[1]) + " at step " + p[0];
      });
    });

    // findings
    (o.marks || []).forEach(function (mk) {
      if (!Number.isFinite(mk.x)) return;
      var x = X(mk.x);
      var gm = svg("g", {"class": "mark"}, root);
      if (mk.id) gm.dataset.finding = mk.id;
      gm.dataset.step = String(mk.x);
      svg("line", {x1: x, x2: x, y1: m.t, y2: m.t + ph, stroke: mk.color, "class": "mark-line"}, gm);
      svg("path", {d: "M" + x + " " + m.t + "h9l-3 4l3 4h-9z", fill: mk.color}, gm);
      svg("title", null, gm).textContent = mk.label;
    });

    if (!hasData) {
      svg("text", {x: m.l + pw / 2, y: m.t + ph / 2, "text-anchor": "middle", "class": "empty"}, root)
        .textContent = lines.length ? "no finite values to draw" : "all series hidden";
    }
    root.dataset.points = String(npts);
    root.dataset.lastStep = lastStep === null ? "" : String(lastStep);

    // hover: crosshair and the values at the nearest measured step
    var hover = svg("rect", {x: m.l, y: m.t, width: pw, height: ph, "class": "hover"}, root);
    var cross = svg("line", {y1: m.t, y2: m.t + ph, "class": "cross", visibility: "hidden"}, root);
    hover.addEventListener("mousemove", function (ev) {
      var box = root.getBoundingClientRect();
      var px = (ev.clientX - box.left) * (W / box.width);
      var step = x0 + (px - m.l) / pw * (x1 - x0);
      self.showTip(step, px, cross, ev, box);
    });
    hover.addEventListener("mouseleave", function () { self.tip.hidden = true; cross.setAttribute("visibility", "hidden"); });
    // a click on a finding's mark: what it cites (the page opens its flagged samples)
    function markAt(ev) {
      if (!o.onMark) return null;
      var box = root.getBoundingClientRect();
      var px = (ev.clientX - box.left) * (W / box.width), best = null, near = 6 * (W / box.width);
      (o.marks || []).forEach(function (mk) {
        var d = Number.isFinite(mk.x) ? Math.abs(X(mk.x) - px) : Infinity;
        if (d <= near) { near = d; best = mk; }
      });
      return best;
    }
    hover.addEventListener("click", function (ev) { var mk = markAt(ev); if (mk) o.onMark(mk); });
    hover.addEventListener("mousemove", function (ev) {
      var mk = markAt(ev);
      hover.style.cursor = mk ? "pointer" : "";
      if (mk && !self.tip.hidden) html("div", "rlv-tip-row", self.tip, "click: the samples of " + mk.label);
    });

    this.svgHost.replaceChildren(root);
    this.svgRoot = root;
    this.renderLegend();
    var note = dropped ? dropped + " value(s) ≤ 0 not drawn on the log scale" : "";
    if (this.note.textContent !== note) this.note.textContent = note;
  };
  Plot.prototype.showTip = function (step, px, cross, ev, box) {
    var lines = this.visibleLines(), rows = [], best = null;
    lines.forEach(function (l) {
      if (!l.steps.length) return;
      var i = lowerBound(l.steps, step);
      if (i >= l.steps.length || (i > 0 && step - l.steps[i - 1] < l.steps[i] - step)) i -= 1;
      if (best === null || Math.abs(l.steps[i] - step) < Math.abs(best - step)) best = l.steps[i];
      rows.push([l, i]);
    });
    if (best === null) return;
    this.tip.replaceChildren();
    html("div", "rlv-tip-step", this.tip, "step " + best);
    var tip = this.tip;
    rows.forEach(function (r) {
      var l = r[0], i = r[1];
      if (l.steps[i] !== best) return;
      var row = html("div", "rlv-tip-row", tip);
      var sw = html("span", "swatch", row); sw.style.backgroundColor = l.color;
      html("span", null, row, l.label + ": " + fmt(l.values[i]));
    });
    var x = this.X(best);
    cross.setAttribute("x1", x); cross.setAttribute("x2", x); cross.setAttribute("visibility", "visible");
    this.tip.hidden = false;
    var left = x * (box.width / this.W);
    this.tip.style.left = Math.max(0, Math.min(left + 12, box.width - 190)) + "px";
    this.tip.style.top = "8px";
  };
  Plot.prototype.renderLegend = function () {
    var self = this;
    // Rebuilt only when its entries change (not with every new point).
    var sig = JSON.stringify((this.opts.lines || []).map(function (l) {
      return [l.key, l.label, l.color, l.dash, !!self.hidden[l.key]];
    }));
    if (sig === this.legendSig) return;
    this.legendSig = sig;
    this.legend.replaceChildren();
    (this.opts.lines || []).forEach(function (l) {
      var item = html("button", "rlv-legend-item" + (self.hidden[l.key] ? " off" : ""), self.legend);
      item.type = "button";
      item.title = "show or hide this series";
      var sw = html("span", "swatch" + (l.dash ? " dashed" : ""), item);
      sw.style.backgroundColor = l.color;
      html("span", null, item, l.label);
      item.addEventListener("click", function () {
        if (self.hidden[l.key]) delete self.hidden[l.key]; else self.hidden[l.key] = true;
        self.render();
      });
    });
  };

  global.RLVPlot = {Plot: Plot, fmt: fmt, num: num, PALETTE: PALETTE, DASHES: DASHES,
                    linearTicks: linearTicks, logTicks: logTicks, tickLabels: tickLabels,
                    decimate: decimate};
})(window);
