// cachesvc dashboard: polls /v1/stats (or /v1/{ns}/stats) and draws it with
// uPlot. Plain JS, no build step; every string from the server is escaped.
(function () {
  "use strict";

  var REFRESH_MS = 3000;
  var STEPS = { "1h": "1m", "6h": "5m", "24h": "15m", "48h": "30m", "168h": "3h", "720h": "12h", "2160h": "24h" };
  var PALETTE = ["#4cc2ff", "#3fcf8e", "#f5b942", "#c38bff", "#ff8a65", "#4dd0c8", "#ff6b9a", "#a3d95b", "#9aa7ff", "#e0c36a"];
  var nf = new Intl.NumberFormat("en-US");
  var state = { ns: "", range: "6h", charts: {}, timer: null, lastOK: 0, inflight: false, token: "", reason: "", last: null };
  try { state.token = localStorage.getItem("cachesvc-token") || ""; } catch (e) { /* storage disabled */ }

  function $(id) { return document.getElementById(id); }
  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function num(n) { return nf.format(n || 0); }
  function pct(r) { return (100 * (r || 0)).toFixed(1) + "%"; }
  function bytes(n) {
    n = n || 0;
    var u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(n >= 100 ? 0 : 1)) + " " + u[i];
  }
  function dur(sec) {
    sec = sec || 0;
    if (sec < 120) return (Math.round(sec * 10) / 10) + " s";
    if (sec < 2 * 3600) return (sec / 60).toFixed(1) + " min";
    if (sec < 3 * 86400) return (sec / 3600).toFixed(1) + " h";
    return (sec / 86400).toFixed(1) + " days";
  }
  function hours(sec) { return (sec / 3600).toFixed(sec >= 36000 ? 0 : 2) + " h"; }
  function ago(iso) {
    if (!iso) return "";
    var s = (Date.now() - Date.parse(iso)) / 1000;
    if (s < 5) return "just now";
    if (s < 90) return Math.round(s) + " s ago";
    if (s < 5400) return Math.round(s / 60) + " min ago";
    if (s < 2 * 86400) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " days ago";
  }
  function rateCell(r, lookups) {
    if (!lookups) return '<span class="rate none">–</span>';
    var cls = r >= 0.7 ? "" : r >= 0.3 ? " mid" : " low";
    return '<span class="rate' + cls + '"><span class="bar"><i style="width:' + (100 * r).toFixed(1) + '%"></i></span>' + pct(r) + "</span>";
  }

  // ---- data ---------------------------------------------------------------

  function statsURL() {
    var q = "?since=" + state.range + "&step=" + STEPS[state.range];
    // A replica of a fleet (its last answer said it has a shared tier) also
    // asks for every replica's health and the fleet's totals.
    return state.ns ? "/v1/" + encodeURIComponent(state.ns) + "/stats" + q : "/v1/stats" + q + (state.fleet ? "&scope=fleet" : "");
  }

  function refresh() {
    if (state.inflight) return;
    state.inflight = true;
    var headers = { Accept: "application/json" };
    if (state.token) headers.Authorization = "Bearer " + state.token;
    fetch(statsURL(), { headers: headers, cache: "no-store" })
      .then(function (r) {
        return r.json().then(function (body) {
          if (!r.ok) {
            var err = new Error((body && body.error && body.error.message) || ("HTTP " + r.status));
            err.status = r.status;
            throw err;
          }
          return body;
        });
      })
      .then(function (d) {
        state.lastOK = Date.now();
        $("error-banner").hidden = true;
        $("auth-form").hidden = true;
        render(d);
        setLive(true, "live · updated " + new Date().toLocaleTimeString());
      })
      .catch(function (e) {
        if (e.status === 401 || e.status === 403) {
          $("auth-form").hidden = false;
          $("error-banner").hidden = true;
          $("auth-text").textContent = e.message + (state.ns ? "" :
            " Reading every namespace needs an admin token; a read token works for its own namespace (choose it above, or add ?ns=NAME).");
          setLive(false, "token needed");
          return;
        }
        $("error-banner").hidden = false;
        $("error-banner").textContent = "Cannot read " + statsURL() + ": " + e.message + ". Retrying every " + REFRESH_MS / 1000 + " s.";
        setLive(false, "disconnected");
      })
      .then(function () { state.inflight = false; });
  }

  function setLive(ok, text) {
    var el = $("live");
    el.className = "live " + (ok ? "ok" : "err");
    $("live-text").textContent = text;
  }

  // ---- render -------------------------------------------------------------

  function render(d) {
    state.last = d;
    var t = d.totals || {};
    var st = d.store || {};
    var empty = !t.lookups && !t.writes && !st.entries;
    $("empty-state").hidden = !empty;
    document.body.classList.toggle("is-empty", empty);

    $("kpi-hit-rate").textContent = t.lookups ? pct(t.hit_rate) : "–";
    $("kpi-hit-rate-sub").textContent = t.lookups ? num(t.hits) + " of " + num(t.lookups) + " lookups hit" : "no lookups yet";
    $("kpi-lookups").textContent = num(t.lookups);
    $("kpi-hits").textContent = num(t.hits);
    $("kpi-misses").textContent = num(t.misses);
    $("kpi-saved").textContent = hours(t.compile_seconds_saved || 0);
    $("kpi-saved-sub").textContent = num(Math.round((t.compile_seconds_saved || 0) * 1000) / 1000) + " s of compiling avoided";
    $("kpi-bytes-out").textContent = bytes(t.bytes_out);
    $("kpi-bytes-in").textContent = bytes(t.bytes_in);
    $("kpi-writes").textContent = num(t.writes);

    var max = st.max_bytes || 0;
    $("kpi-store").textContent = bytes(st.bytes) + (max ? " / " + bytes(max) : "");
    var frac = max ? Math.min(1, (st.bytes || 0) / max) : 0;
    var bar = $("kpi-store-bar");
    bar.style.width = (max ? 100 * frac : 0).toFixed(1) + "%";
    bar.className = frac > 0.95 ? "full" : frac > 0.8 ? "high" : "";
    // Disk use runs ahead of the accounted size by what value-log GC has
    // not returned to the disk yet.
    $("kpi-store-sub").textContent = num(st.entries) + " entries" + (max ? " · " + (100 * frac).toFixed(0) + "% of limit" : " · no size limit") +
      (st.disk_bytes ? " · " + bytes(st.disk_bytes) + " on disk" : "");
    $("kpi-evictions").textContent = num(st.evictions);
    $("kpi-integrity").textContent = num(st.integrity_failures);
    $("kpi-integrity").parentNode.classList.toggle("alert", (st.integrity_failures || 0) > 0);
    var le = d.leases || {};
    $("kpi-leases").textContent = num(le.held);
    $("kpi-waiting").textContent = num(le.waiting);
    if (d.server && d.server.version) $("footer-version").textContent = "cachesvc " + d.server.version;

    state.fleet = !!(d.shared_tier && d.shared_tier.configured);
    renderFleet(d);
    updateNamespaces(d);
    renderNSTable(d);
    renderQuotas(st);
    renderRuns(d.runs || []);
    renderTop(d.top_entries || []);
    renderReasons(d.miss_reasons || []);
    renderMisses(d.recent_misses || []);
    if (d.series) renderCharts(d.series, st);
    // Charts drawn while hidden (empty cache) get their size when shown.
    if (state.wasEmpty && !empty) resizeCharts();
    state.wasEmpty = empty;
  }

  function updateNamespaces(d) {
    if (state.ns) return; // the filtered view lists only one namespace
    var sel = $("ns-select");
    var have = {};
    for (var i = 1; i < sel.options.length; i++) have[sel.options[i].value] = true;
    (d.namespaces || []).forEach(function (n) {
      if (!have[n.namespace] && n.namespace.charAt(0) !== "_") {
        var o = document.createElement("option");
        o.value = o.textContent = n.namespace;
        sel.appendChild(o);
      }
    });
  }

  function renderNSTable(d) {
    var rows = [];
    (d.namespaces || []).forEach(function (n) {
      var bs = n.backends || [];
      rows.push('<tr class="ns-row" data-ns="' + esc(n.namespace) + '"><td>' + esc(n.namespace) + "</td><td>" +
        (bs.length === 1 ? esc(bs[0].backend) : "all (" + bs.length + ")") + "</td>" + cells(n) + "</tr>");
      if (bs.length > 1) bs.forEach(function (b) {
        rows.push('<tr class="sub" data-ns="' + esc(n.namespace) + '" data-backend="' + esc(b.backend) + '"><td></td><td>' + esc(b.backend) + "</td>" + cells(b) + "</tr>");
      });
    });
    $("ns-table").tBodies[0].innerHTML = rows.length ? rows.join("") :
      '<tr><td colspan="9" class="none">No lookups yet.</td></tr>';
  }
  function cells(c) {
    return '<td class="num">' + num(c.lookups) + '</td><td class="num">' + num(c.hits) + '</td><td class="num">' + num(c.misses) +
      "</td><td>" + rateCell(c.hit_rate, c.lookups) + '</td><td class="num">' + dur(c.compile_seconds_saved) +
      '</td><td class="num">' + bytes(c.bytes_out) + '</td><td class="num">' + num(c.writes) + "</td>";
  }

  // The quotas card: each namespace's usage of this server's store against
  // its quota (serve --namespaces), from store.namespaces.
  function renderQuotas(st) {
    var nss = st.namespaces || [];
    $("quota-card").hidden = !nss.length;
    $("quota-table").tBodies[0].innerHTML = nss.map(function (n) {
      var fill = Math.max(n.max_bytes ? n.bytes / n.max_bytes : 0, n.max_entries ? n.entries / n.max_entries : 0);
      var exp = [];
      if (n.max_idle_s) exp.push("idle " + dur(n.max_idle_s));
      if (n.max_age_s) exp.push("age " + dur(n.max_age_s));
      return '<tr data-ns="' + esc(n.namespace) + '"><td>' + esc(n.namespace) + '</td><td class="num">' + num(n.entries) +
        (n.max_entries ? " / " + num(n.max_entries) : "") + '</td><td class="num">' + bytes(n.bytes) + (n.max_bytes ? " / " + bytes(n.max_bytes) : "") +
        "</td><td>" + (n.max_bytes || n.max_entries ? quotaCell(fill) : '<span class="none">no quota</span>') + "</td><td>" +
        (exp.length ? esc(exp.join(" · ")) : '<span class="none">never</span>') + '</td><td class="num">' + num(n.evictions) +
        '</td><td class="num">' + num(n.expirations) + "</td></tr>";
    }).join("");
  }
  function quotaCell(f) {
    var cls = f > 0.95 ? " low" : f > 0.8 ? " mid" : "";
    return '<span class="rate' + cls + '"><span class="bar"><i style="width:' + (100 * Math.min(1, f)).toFixed(1) + '%"></i></span>' + pct(f) + "</span>";
  }

  function sharedCell(sh) {
    if (!sh || !sh.configured) return '<span class="none">none</span>';
    if (sh.reachable) return '<span class="health ok">reachable</span>';
    return '<span class="health bad" title="' + esc(sh.last_error) + '">unreachable</span>';
  }

  // The fleet card: this replica's shared tier and, with ?scope=fleet,
  // every replica's health and numbers, and the fleet's totals.
  function renderFleet(d) {
    var card = $("fleet-card");
    var sh = d.shared_tier;
    card.hidden = !(sh && sh.configured);
    if (card.hidden) return;
    var f = d.fleet, reps = (f && f.replicas) || [];
    var ft = (f && f.totals && f.totals.totals) || {};
    $("fleet-summary").innerHTML = "shared tier " + sharedCell(sh) + (sh.queue_depth ? " · " + num(sh.queue_depth) + " uploads queued" : "") +
      (f ? " · " + num(f.healthy) + " of " + num(reps.length) + " replicas healthy · fleet: " + num(ft.hits) + " of " + num(ft.lookups) +
        " lookups hit, " + hours(ft.compile_seconds_saved || 0) + " saved" : "");
    $("fleet-table").tBodies[0].innerHTML = reps.length ? reps.map(function (r) {
      var t = r.totals || {}, hot = r.hot || {};
      return '<tr data-replica="' + esc(r.id) + '"><td>' + (r.url ? '<a href="' + esc(r.url) + '/">' + esc(r.id) + "</a>" : esc(r.id)) +
        '</td><td><span class="health ' + (r.health === "ok" ? "ok" : "bad") + '">' + esc(r.health) + "</span></td><td>" + esc(ago(r.heartbeat)) +
        "</td><td>" + esc(r.version) + '</td><td class="num">' + bytes(hot.bytes) + " · " + num(hot.entries) + "</td><td>" + sharedCell(r.shared) +
        '</td><td class="num">' + num((r.shared || {}).queue_depth) + '</td><td class="num">' + num(t.lookups) + "</td><td>" + rateCell(t.hit_rate, t.lookups) + "</td></tr>";
    }).join("") : '<tr><td colspan="9" class="none">No heartbeats read yet (replicas write one every 10 s).</td></tr>';
  }

  function renderRuns(runs) {
    $("runs-table").tBodies[0].innerHTML = runs.length ? runs.map(function (r) {
      return '<tr data-run="' + esc(r.run) + '"><td>' + esc(r.run) + "</td><td>" + esc((r.namespaces || []).join(", ")) +
        '</td><td class="num">' + num(r.lookups) + '</td><td class="num">' + num(r.hits) + "</td><td>" + rateCell(r.hit_rate, r.lookups) +
        '</td><td class="num" title="' + esc(r.compile_seconds_saved) + ' s">' + dur(r.compile_seconds_saved) + "</td><td>" + esc(ago(r.last_seen)) + "</td></tr>";
    }).join("") : '<tr><td colspan="7" class="none">No run ids seen yet. Set CACHESVC_RUN (or the X-Cachesvc-Run header) to compare the runs of a sweep.</td></tr>';
  }

  function renderTop(es) {
    $("top-table").tBodies[0].innerHTML = es.length ? es.map(function (e) {
      return '<tr data-key="' + esc(e.key) + '"><td class="name" title="' + esc(e.key) + '">' + (e.name ? esc(e.name) + " " : "") +
        '<span class="mono">' + esc(e.key.slice(0, 12)) + "…</span></td><td>" + esc(e.namespace) + '</td><td class="num">' + dur(e.compile_seconds) +
        '</td><td class="num">' + num(e.hits) + '</td><td class="num">' + dur(e.seconds_saved) + "</td></tr>";
    }).join("") : '<tr><td colspan="5" class="none">No hits yet.</td></tr>';
  }

  function renderReasons(rs) {
    var total = rs.reduce(function (a, r) { return a + r.count; }, 0);
    $("reasons").innerHTML = rs.length ? rs.map(function (r) {
      var sel = state.reason === r.reason ? " selected" : "";
      return '<div class="reason' + sel + '" data-reason="' + esc(r.reason) + '" title="Show only these misses"><span class="label">' + esc(r.label) +
        '</span><span class="bar"><i style="width:' + (100 * r.count / total).toFixed(1) + '%"></i></span><span class="count">' + num(r.count) + "</span></div>";
    }).join("") : '<div class="none">No explained misses yet. Lookups by signature (POST /v1/{ns}/lookup) explain every miss.</div>';
  }

  function renderMisses(ms) {
    if (state.reason) ms = ms.filter(function (m) { return (m.explanation || {}).reason === state.reason; });
    $("miss-filter").textContent = state.reason ? "· " + labelOf(state.reason) + " (click again for all)" : "";
    $("recent-misses").innerHTML = ms.length ? ms.slice(0, 30).map(function (m) {
      var ex = m.explanation || {};
      var near = (ex.nearest && ex.nearest[0]) || null;
      var diffs = near ? near.diffs.slice(0, 4).map(function (df) {
        return "<div><b>" + esc(df.component) + "</b>: " + esc(df.want || "∅") + " → stored " + esc(df.have || "∅") + "</div>";
      }).join("") : "";
      return '<div class="miss" data-reason="' + esc(ex.reason) + '"><div class="head"><span class="tag">' + esc(labelOf(ex.reason)) + "</span><span>" +
        esc(m.display_name || m.key.slice(0, 16)) + '</span><span class="mono">' + esc(m.namespace) + " · " + esc(m.backend) + '</span><span class="when">' + esc(ago(m.time)) +
        '</span></div><div class="summary">' + esc(ex.summary || "") + '</div><div class="diffs">' + diffs + "</div></div>";
    }).join("") : '<div class="none">No misses recorded.</div>';
  }
  function labelOf(reason) {
    if (!reason) return "unexplained";
    return reason.split("+").join(", ").replace(/_/g, " ");
  }

  // ---- charts -------------------------------------------------------------

  var INT_INCRS = [];
  for (var e = 0; e < 16; e++) [1, 2, 5].forEach(function (m) { INT_INCRS.push(m * Math.pow(10, e)); });
  var BYTE_INCRS = [];
  for (var p2 = 0; p2 < 52; p2++) BYTE_INCRS.push(Math.pow(2, p2));
  var AXIS = { stroke: "#8b98a5", grid: { stroke: "#232d38", width: 1 }, ticks: { stroke: "#2a3541", width: 1 } };

  function chartSize(el) {
    return { width: Math.max(200, el.clientWidth), height: Math.max(120, el.clientHeight - 34) };
  }

  // draw creates or updates the chart in element id; it recreates it when
  // the set of series changes.
  function draw(id, names, data, fmt, opts) {
    opts = opts || {};
    var el = $(id);
    var sig = names.join("|");
    var c = state.charts[id];
    if (c && c.sig === sig) { c.u.setData(data); return; }
    if (c) { c.u.destroy(); }
    el.innerHTML = "";
    var series = [{}].concat(names.map(function (n, i) {
      var color = (opts.colors && opts.colors[i]) || PALETTE[i % PALETTE.length];
      var s = { label: n, stroke: color, width: i === 0 ? 2.2 : 1.5, spanGaps: true,
        value: function (u, v) { return v == null ? "–" : fmt(v); },
        // Show points where data is sparse, so a lone bucket is visible.
        points: { size: 6, fill: color, show: function (u, si) { var n = nonNull(u.data[si]); return n > 0 && n <= 48; } } };
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
    var u = new uPlot({
      width: size.width, height: size.height, series: series,
      cursor: { points: { size: 7 } },
      scales: { x: { time: true }, y: opts.y || { auto: true, range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; } } },
      axes: [Object.assign({}, AXIS), Object.assign({ size: 66, values: function (u, vs) { return vs.map(fmt); } },
        opts.ints ? { incrs: opts.ints === "bytes" ? BYTE_INCRS : INT_INCRS } : {}, AXIS)],
      legend: { live: true },
    }, data, el);
    state.charts[id] = { u: u, sig: sig };
  }

  function nonNull(a) {
    var n = 0;
    for (var i = 0; i < a.length; i++) if (a[i] != null && a[i] !== 0) n++;
    return n;
  }

  function renderCharts(s, store) {
    var t = s.t;
    // Hit rate: overall, then per namespace (unfiltered view), then per backend.
    var names = ["overall"], data = [t, s.total.hit_rate], dash = [false];
    Object.keys(s.namespaces || {}).sort().forEach(function (ns) { names.push("ns " + ns); data.push(s.namespaces[ns].hit_rate); dash.push(false); });
    var bks = Object.keys(s.backends || {}).sort();
    if (bks.length > 1 || state.ns) bks.forEach(function (b) { names.push("backend " + b); data.push(s.backends[b].hit_rate); dash.push(true); });
    draw("chart-hit-rate", names, data, function (v) { return (100 * v).toFixed(0) + "%"; }, { y: { range: [0, 1] }, dash: dash });

    draw("chart-lookups", ["hits", "misses"], [t, s.total.hits, s.total.misses], function (v) { return num(Math.round(v)); },
      { colors: ["#3fcf8e", "#ff6b6b"], bars: [true, true], ints: true });

    var cum = [], acc = 0;
    s.total.seconds_saved.forEach(function (v) { acc += v; cum.push(acc / 3600); });
    draw("chart-saved", ["hours saved"], [t, cum], function (v) { return v.toFixed(v >= 10 ? 0 : 2) + " h"; }, { colors: ["#3fcf8e"], fill: true });

    draw("chart-bytes", ["served", "uploaded"], [t, s.total.bytes_out, s.total.bytes_in], bytes, { colors: ["#4cc2ff", "#c38bff"], bars: [true, true], ints: "bytes" });

    // Store size: carry the last sample forward; the limit is a flat line.
    var last = null, size = s.store_bytes.map(function (v) { if (v) last = v; return last; });
    var limit = t.map(function () { return store.max_bytes || null; });
    if (store.bytes != null && size.length) size[size.length - 1] = store.bytes;
    draw("chart-store", store.max_bytes ? ["store size", "limit"] : ["store size"], store.max_bytes ? [t, size, limit] : [t, size], bytes,
      { colors: ["#4cc2ff", "#ff6b6b"], dash: [false, true], fill: true, ints: "bytes" });

    draw("chart-evictions", ["evictions", "integrity failures"], [t, s.store_evictions, s.integrity_failures], function (v) { return num(Math.round(v)); },
      { colors: ["#f5b942", "#ff6b6b"], bars: [true, true], ints: true });
  }

  function resizeCharts() {
    Object.keys(state.charts).forEach(function (id) {
      state.charts[id].u.setSize(chartSize($(id)));
    });
  }

  // ---- wiring -------------------------------------------------------------

  function restart() {
    if (state.timer) clearInterval(state.timer);
    refresh();
    state.timer = setInterval(refresh, REFRESH_MS);
  }

  function init() {
    var params = new URLSearchParams(location.search);
    if (params.get("ns")) {
      state.ns = params.get("ns");
      var o = document.createElement("option");
      o.value = o.textContent = state.ns;
      $("ns-select").appendChild(o);
      $("ns-select").value = state.ns;
    }
    if (params.get("range") && STEPS[params.get("range")]) { state.range = params.get("range"); $("range-select").value = state.range; }
    Array.prototype.forEach.call(document.querySelectorAll(".server-url"), function (e) { e.textContent = location.origin; });
    $("ns-select").addEventListener("change", function (e) { state.ns = e.target.value; syncURL(); restart(); });
    $("range-select").addEventListener("change", function (e) { state.range = e.target.value; syncURL(); restart(); });
    $("auth-form").addEventListener("submit", function (e) {
      e.preventDefault();
      state.token = $("auth-token").value.trim();
      try { localStorage.setItem("cachesvc-token", state.token); } catch (err) { /* storage disabled */ }
      restart();
    });
    // Clicking a reason shows only its recent misses; clicking it again, all.
    $("reasons").addEventListener("click", function (e) {
      var row = e.target.closest(".reason");
      if (!row) return;
      var r = row.getAttribute("data-reason");
      state.reason = state.reason === r ? "" : r;
      if (state.last) render(state.last);
    });
    var pending = null;
    window.addEventListener("resize", function () { clearTimeout(pending); pending = setTimeout(resizeCharts, 100); });
    restart();
  }
  function syncURL() {
    var p = new URLSearchParams();
    if (state.ns) p.set("ns", state.ns);
    if (state.range !== "6h") p.set("range", state.range);
    history.replaceState(null, "", location.pathname + (p.toString() ? "?" + p : ""));
  }

  window.cachesvcDashboard = { refresh: refresh, state: state };
  init();
})();
