// cachesvc dashboard: the uPlot charts (CS.charts). One overall hit-rate
// chart (the per-namespace and per-backend history is in the table's
// sparklines), and the volume, saving and store charts.
(function () {
  "use strict";
  var CS = window.CS, $ = CS.$, num = CS.num, bytes = CS.bytes;
  var PALETTE = ["#4cc2ff", "#3fcf8e", "#f5b942", "#c38bff", "#ff8a65", "#4dd0c8"];
  var charts = {};

  var INT_INCRS = [];
  for (var e = 0; e < 16; e++) [1, 2, 5].forEach(function (m) { INT_INCRS.push(m * Math.pow(10, e)); });
  var BYTE_INCRS = [];
  for (var p2 = 0; p2 < 52; p2++) BYTE_INCRS.push(Math.pow(2, p2));
  var AXIS = { stroke: "#8b98a5", grid: { stroke: "#232d38", width: 1 }, ticks: { stroke: "#2a3541", width: 1 } };

  // axisSize is the y axis's width: its widest label, measured in the
  // axis's font, plus the ticks and the gap (uPlot's own layout), so that
  // "1,000,000" is not cut to "000,000" by a fixed width; at least 50 px,
  // so that the plots of charts side by side start near one another. uPlot
  // asks again while the layout settles: after two rounds it keeps its
  // answer.
  function axisSize(u, values, i, cycle) {
    var axis = u.axes[i];
    if (cycle > 1) return axis._size;
    var widest = 0;
    u.ctx.font = axis.font[0];
    (values || []).forEach(function (v) { widest = Math.max(widest, u.ctx.measureText(v).width); });
    return Math.max(50, Math.ceil(widest / devicePixelRatio + axis.ticks.size + axis.gap + 4));
  }

  // xSpace is the least distance between the time axis's ticks: its
  // widest label ("12:59pm", 7 characters) and a gap. uPlot's default of
  // 50 px ran the labels from 10:00 to 12:59 into one another
  // ("11:23am11:24am") on a 1400-pixel page.
  function xSpace(u) {
    u.ctx.font = u.axes[0].font[0];
    return Math.ceil(u.ctx.measureText("12:59pm").width / devicePixelRatio) + 16;
  }

  function chartSize(el) {
    return { width: Math.max(200, el.clientWidth), height: Math.max(120, el.clientHeight - 34) };
  }

  // draw creates or updates the chart in element id; it recreates it when
  // the set of series changes. opts.marks[i], when given, lists for series
  // i whether each step had data of its own: points are drawn there only,
  // when the data are sparse, so that a lone step is visible and an empty
  // step (or a cumulative line carried through one) gets no dot. In data,
  // null is a step without a sample (a gap in the line, no bar; shaded,
  // and "no sample" in the legend, where opts.gaps says so) and undefined
  // a step with nothing to draw that the line passes over (a hit rate
  // without lookups).
  function draw(id, names, data, fmt, opts) {
    opts = opts || {};
    var el = $(id), sig = names.join("|"), c = charts[id];
    if (c && c.sig === sig) { c.marks = opts.marks || []; c.gaps = opts.gaps || []; c.u.setData(data); return; }
    if (c) c.u.destroy();
    el.innerHTML = "";
    c = charts[id] = { sig: sig, marks: opts.marks || [], gaps: opts.gaps || [] };
    var series = [{}].concat(names.map(function (n, i) {
      var color = (opts.colors && opts.colors[i]) || PALETTE[i % PALETTE.length];
      var s = { label: n, stroke: color, width: i === 0 ? 2.2 : 1.5, spanGaps: false,
        value: function (u, v, si, di) { return di != null && c.gaps[di] ? "no sample" : v == null ? "–" : fmt(v); },
        points: { size: 6, fill: color, show: true, filter: function (u, si) { return pointsAt(u, si, c.marks[si - 1]); } } };
      if (opts.dash && opts.dash[i]) s.dash = [6, 4];
      if (opts.fill && i === 0) s.fill = "rgba(76,194,255,0.10)";
      if (opts.bars) {
        var align = opts.bars.length > 1 ? (i === 0 ? -1 : 1) : 0;
        s.paths = uPlot.paths.bars({ size: [opts.bars.length > 1 ? 0.4 : 0.7, 28, 2], align: align });
        s.fill = color + "cc";
        s.width = 0;
        s.points = { show: false };
      }
      return s;
    }));
    var size = chartSize(el);
    c.u = new uPlot({
      width: size.width, height: size.height, series: series,
      cursor: { points: { size: 7 } },
      scales: { x: opts.bars ? { time: true, range: halfStepMargins } : { time: true }, y: opts.y || { auto: true, range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; } } },
      axes: [Object.assign({ space: xSpace }, AXIS), Object.assign({ size: axisSize, values: function (u, vs) { return vs.map(fmt); } },
        opts.ints ? { incrs: opts.ints === "bytes" ? BYTE_INCRS : INT_INCRS } : {}, AXIS)],
      legend: { live: true },
      hooks: { drawClear: [function (u) { shadeGaps(u, c.gaps); }] },
    }, data, el);
  }

  // shadeGaps shades the steps without a sample (gaps[i] true) across the
  // plot, so that a bar chart, whose empty step looks like a zero, shows
  // them too.
  function shadeGaps(u, gaps) {
    var t = u.data[0], half = t.length > 1 ? (t[1] - t[0]) / 2 : 30, b = u.bbox, ctx = u.ctx;
    ctx.save();
    ctx.fillStyle = "rgba(139,152,165,0.13)";
    for (var i = 0; i < t.length; i++) {
      if (!gaps[i]) continue;
      var j = i;
      while (j + 1 < t.length && gaps[j + 1]) j++;
      var x0 = Math.max(b.left, u.valToPos(t[i] - half, "x", true)), x1 = Math.min(b.left + b.width, u.valToPos(t[j] + half, "x", true));
      if (x1 > x0) ctx.fillRect(x0, b.top, x1 - x0, b.height);
      i = j;
    }
    ctx.restore();
  }

  // halfStepMargins is the x range of a bar chart: half a step more on
  // each side than the data, since a step's bars stand beside its time (two
  // series: hits left of it, misses right of it). Without the margins the
  // newest step's right-hand bar lay past the plot and was not drawn.
  function halfStepMargins(u, min, max) {
    var t = u.data[0], half = t.length > 1 ? (t[1] - t[0]) / 2 : 30;
    return [min - half, max + half];
  }

  // pointsAt returns the indices to mark on series si: the steps with data
  // of their own (marks[i] true; without marks, every non-null value),
  // and none when more than 48 steps have data (the line shows them).
  function pointsAt(u, si, marks) {
    var d = u.data[si], out = [];
    for (var i = 0; i < d.length; i++) if (d[i] != null && (!marks || marks[i])) out.push(i);
    return out.length <= 48 ? out : [];
  }

  // savedUnit is the unit a total of seconds saved is charted in: seconds
  // under two minutes, minutes under two hours, hours from there.
  function savedUnit(total) {
    if (total < 120) return { name: "seconds", abbr: "s", seconds: 1 };
    if (total < 7200) return { name: "minutes", abbr: "min", seconds: 60 };
    return { name: "hours", abbr: "h", seconds: 3600 };
  }

  function has(a) { return a.map(function (v) { return v > 0; }); }

  // gapsOf lists for each step of s whether it had no sample (the server
  // was not running): series.sampled false. A series without the field
  // (an older server's) has a sample in every step.
  function gapsOf(s) {
    var sampled = s.sampled || [];
    return s.t.map(function (_, i) { return sampled[i] === false; });
  }

  // holed returns the values of a with null at the gaps: a count there is
  // no sample, not zero.
  function holed(a, gaps) { return a.map(function (v, i) { return gaps[i] ? null : v; }); }

  // render draws the series s; store is the store's numbers (bytes, the
  // limit line's max_bytes, and its tier), scoped is the namespace when
  // one is selected. It returns how many steps had no sample.
  function render(s, store, scoped) {
    var t = s.t, tot = s.total, gaps = gapsOf(s);
    // A step without lookups has no hit rate: the line passes over it
    // (undefined); one without a sample is a gap (null).
    var rate = tot.hit_rate.map(function (v, i) { return gaps[i] ? null : v == null ? undefined : v; });
    draw("chart-hit-rate", ["hit rate"], [t, rate], function (v) { return (100 * v).toFixed(0) + "%"; },
      { y: { range: [0, 1] }, fill: true, gaps: gaps });
    draw("chart-lookups", ["hits", "misses"], [t, holed(tot.hits, gaps), holed(tot.misses, gaps)], function (v) { return num(Math.round(v)); },
      { colors: ["#3fcf8e", "#ff6b6b"], bars: [true, true], ints: true, gaps: gaps });

    // Cumulative time saved, in the unit its total reads best in: a first
    // run saves seconds, which 0.00 h on every tick would hide.
    var cum = [], acc = 0;
    tot.seconds_saved.forEach(function (v) { acc += v; cum.push(acc); });
    var unit = savedUnit(acc);
    draw("chart-saved", [unit.name + " saved"], [t, holed(cum.map(function (v) { return v / unit.seconds; }), gaps)],
      function (v) { return (v >= 10 || v === Math.round(v) ? num(Math.round(v)) : v.toFixed(v >= 1 ? 1 : 2)) + " " + unit.abbr; },
      { colors: ["#3fcf8e"], fill: true, marks: [has(tot.seconds_saved)], gaps: gaps });

    draw("chart-bytes", ["served", "uploaded"], [t, holed(tot.bytes_out, gaps), holed(tot.bytes_in, gaps)], bytes,
      { colors: ["#4cc2ff", "#c38bff"], bars: [true, true], ints: "bytes", gaps: gaps });

    // Store size: the whole store's, or in a namespace's view the bytes
    // that namespace stores (its own series) against its quota. A step
    // without a sample is null (a gap), an empty store 0; the newest step
    // is the size now. The limit is a flat line.
    var size = s.store_bytes.slice();
    var max = store.max_bytes || 0;
    var limit = t.map(function () { return max || null; });
    if (store.bytes != null && size.length) size[size.length - 1] = store.bytes;
    // A store without a limit (no serve --max-size) has no line to be
    // against: the title says only what is drawn. On a fleet replica the
    // series is the shared tier's size (every replica's entries), while the
    // card beside it is this replica's hot tier: the title says which.
    $("store-chart-title").textContent = scoped ? "Stored in " + scoped + (max ? " against its quota" : "") :
      store.tier === "shared" ? "Shared tier size (the whole fleet's entries; no limit)" : "Store size" + (max ? " against its limit" : "");
    draw("chart-store", max ? [scoped ? "stored" : "store size", scoped ? "quota" : "limit"] : [scoped ? "stored" : "store size"], max ? [t, size, limit] : [t, size], bytes,
      { colors: ["#4cc2ff", "#ff6b6b"], dash: [false, true], fill: true, ints: "bytes", gaps: gaps,
        marks: [s.store_bytes.map(function (v) { return v != null; }), t.map(function () { return false; })] });

    // The server's, like the store size: in a namespace's view the card
    // above counts only that namespace's evictions, so say whose these are.
    $("evictions-chart-title").textContent = "Evictions and integrity failures" + (scoped ? " (whole server)" : "");
    // An empty plot says nothing by itself: say that there were none.
    var none = s.store_evictions.every(function (v) { return !v; }) && s.integrity_failures.every(function (v) { return !v; });
    $("evictions-chart-hint").textContent = none ? "(none in this range)" : "";
    draw("chart-evictions", ["evictions", "integrity failures"], [t, holed(s.store_evictions, gaps), holed(s.integrity_failures, gaps)], function (v) { return num(Math.round(v)); },
      { colors: ["#f5b942", "#ff6b6b"], bars: [true, true], ints: true, gaps: gaps });
    return gaps.filter(Boolean).length;
  }

  function resize() {
    Object.keys(charts).forEach(function (id) { charts[id].u.setSize(chartSize($(id))); });
  }

  // firstDatum returns the start (Unix seconds) of the first step of s
  // with any lookup, write or store sample, or null when there is none.
  function firstDatum(s) {
    for (var i = 0; i < s.t.length; i++) {
      if (s.total.lookups[i] || s.total.writes[i] || s.store_bytes[i] || s.store_evictions[i]) return s.t[i];
    }
    return null;
  }

  CS.charts = { render: render, resize: resize, firstDatum: firstDatum, all: charts };
})();
