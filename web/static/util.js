// cachesvc dashboard: formatting and DOM helpers shared by the panels
// (window.CS). Plain JS, no build step; every string from the server is
// escaped with esc before it reaches innerHTML.
(function () {
  "use strict";
  var nf = new Intl.NumberFormat("en-US");
  var CS = window.CS = window.CS || {};

  CS.$ = function (id) { return document.getElementById(id); };
  CS.esc = function (s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  };
  CS.num = function (n) { return nf.format(n || 0); };
  // plural counts n things as `cachesvc stats` does (report.Plural):
  // "1 entry", "1,000 entries".
  CS.plural = function (n, one, many) { return n === 1 ? "1 " + one : CS.num(n) + " " + many; };
  CS.pct = function (r) { return (100 * (r || 0)).toFixed(1) + "%"; };
  CS.bytes = function (n) {
    n = n || 0;
    var u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(n >= 100 ? 0 : 1)) + " " + u[i];
  };
  CS.dur = function (sec) {
    sec = sec || 0;
    if (sec < 120) return (Math.round(sec * 10) / 10) + " s";
    if (sec < 2 * 3600) return (sec / 60).toFixed(1) + " min";
    if (sec < 3 * 86400) return (sec / 3600).toFixed(1) + " h";
    return (sec / 86400).toFixed(1) + " days";
  };
  CS.ago = function (iso) {
    if (!iso) return "";
    var s = (Date.now() - Date.parse(iso)) / 1000;
    if (s < 5) return "just now";
    if (s < 90) return Math.round(s) + " s ago";
    if (s < 5400) return Math.round(s / 60) + " min ago";
    if (s < 2 * 86400) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " days ago";
  };
  // every renders an interval of sec seconds in its largest whole unit,
  // as `cachesvc stats` does: "every 10 minutes", "every hour".
  CS.every = function (sec) {
    var n = Math.round(sec), unit = "second";
    if (n >= 3600 && n % 3600 === 0) { n /= 3600; unit = "hour"; }
    else if (n >= 60 && n % 60 === 0) { n /= 60; unit = "minute"; }
    return n === 1 ? "every " + unit : "every " + CS.num(n) + " " + unit + "s";
  };
  CS.rateCell = function (r, lookups) {
    if (!lookups) return '<span class="rate none">–</span>';
    var cls = r >= 0.7 ? "" : r >= 0.3 ? " mid" : " low";
    return '<span class="rate' + cls + '"><span class="bar"><i style="width:' + (100 * r).toFixed(1) + '%"></i></span>' + CS.pct(r) + "</span>";
  };
  // meter is a usage bar with its text: used of max (no bar when max is 0,
  // meaning no limit).
  CS.meter = function (used, max, fmt, title) {
    var frac = max ? Math.min(1, used / max) : 0;
    var cls = frac > 0.95 ? "full" : frac > 0.8 ? "high" : "";
    return '<span class="usage" title="' + CS.esc(title || "") + '">' + (max ? '<span class="bar"><i class="' + cls + '" style="width:' +
      (100 * frac).toFixed(1) + '%"></i></span>' : "") + '<span class="fig">' + fmt(used) + (max ? " / " + fmt(max) : "") + "</span>" +
      (max ? "" : ' <span class="muted">no quota</span>') + "</span>";
  };

  // sparkline draws one row's history as inline SVG: lookups per step as
  // bars, the hit rate as a line broken where a step had no lookups (an
  // empty step draws nothing).
  CS.sparkline = function (p, label) {
    if (!p || !p.lookups || !p.lookups.length) return '<span class="muted">–</span>';
    var W = 120, H = 26, n = p.lookups.length, bw = W / n, max = 1, i;
    for (i = 0; i < n; i++) if (p.lookups[i] > max) max = p.lookups[i];
    var bars = "", segs = [], cur = "";
    for (i = 0; i < n; i++) {
      var x = i * bw;
      if (p.lookups[i]) {
        var h = Math.max(1, (H - 2) * p.lookups[i] / max);
        bars += '<rect x="' + x.toFixed(1) + '" y="' + (H - h).toFixed(1) + '" width="' + Math.max(1, bw - 0.5).toFixed(1) + '" height="' + h.toFixed(1) + '"/>';
      }
      var r = p.hit_rate[i];
      if (r == null) { if (cur) segs.push(cur); cur = ""; continue; }
      var pt = (x + bw / 2).toFixed(1) + "," + (1 + (H - 2) * (1 - r)).toFixed(1);
      cur += (cur ? " " : "M") + pt;
    }
    if (cur) segs.push(cur);
    // A step alone between empty ones is a dot, so that it is visible.
    var dots = segs.filter(function (s) { return s.indexOf(" ") < 0; }).map(function (s) {
      var xy = s.slice(1).split(",");
      return '<circle cx="' + xy[0] + '" cy="' + xy[1] + '" r="1.8"/>';
    }).join("");
    var line = segs.filter(function (s) { return s.indexOf(" ") >= 0; }).join(" ").replace(/ (\d)/g, " L$1");
    return '<svg class="spark" viewBox="0 0 ' + W + " " + H + '" width="' + W + '" height="' + H + '" role="img"><title>' + CS.esc(label) +
      '</title><g class="vol">' + bars + "</g>" + (line ? '<path d="' + line + '"/>' : "") + dots + "</svg>";
  };

  // sortable makes the table's th[data-sort] headers sort state[key] and
  // call redraw; the current column shows an arrow.
  CS.sortable = function (table, sort, redraw) {
    table.tHead.addEventListener("click", function (e) {
      var th = e.target.closest("th[data-sort]");
      if (!th) return;
      var k = th.getAttribute("data-sort");
      sort.desc = sort.key === k ? !sort.desc : k !== "name";
      sort.key = k;
      redraw();
    });
  };
  CS.markSort = function (table, sort) {
    Array.prototype.forEach.call(table.tHead.querySelectorAll("th[data-sort]"), function (th) {
      var on = th.getAttribute("data-sort") === sort.key;
      th.classList.toggle("sorted", on);
      th.setAttribute("aria-sort", on ? (sort.desc ? "descending" : "ascending") : "none");
    });
  };
})();
