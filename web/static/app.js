// cachesvc dashboard: polls /v1/stats (or /v1/{ns}/stats), fits the time
// range to the data, and hands the answer to the panels (util.js,
// charts.js, tables.js, runs.js, fleet.js). Plain JS, no build step.
(function () {
  "use strict";
  var CS = window.CS, $ = CS.$, num = CS.num, pct = CS.pct, bytes = CS.bytes;
  var REFRESH_MS = 3000;
  // The server's base URL as the browser reaches it: the page's address
  // without its file name, so that behind a proxy that serves cachesvc
  // under a path prefix (https://host/cachesvc/) it keeps the prefix.
  // Every URL the page fetches or links to is relative to the page.
  var BASE_URL = location.origin + location.pathname.replace(/\/[^\/]*$/, "");
  var RANGES = { "1h": 3600, "6h": 6 * 3600, "24h": 86400, "48h": 2 * 86400, "168h": 7 * 86400, "720h": 30 * 86400, "2160h": 90 * 86400 };
  var STEPS = { "1h": "1m", "6h": "5m", "24h": "15m", "48h": "30m", "168h": "3h", "720h": "12h", "2160h": "24h" };
  // state.fitFrom is the first step with data (Unix seconds) once known:
  // the charts start there when it is inside the selected range.
  var state = { ns: "", range: "6h", fitFrom: null, timer: null, inflight: false, token: "", reason: "", last: null,
    fleetDown: null, skipFleet: false };
  try { state.token = localStorage.getItem("cachesvc-token") || ""; } catch (e) { /* storage disabled */ }

  // MIN_FIT_S is the shortest span the charts fit to, so that a server up
  // for a minute still draws a few steps.
  var MIN_FIT_S = 600;

  // since returns the series' start: the selected range, or the first
  // datum when that is later (then the server picks the step: span/72,
  // at least a minute).
  function sinceParams() {
    var now = Math.floor(Date.now() / 1000), from = now - RANGES[state.range];
    if (state.fitFrom != null && state.fitFrom > from) return "since=" + Math.max(from, Math.min(state.fitFrom, now - MIN_FIT_S));
    return "since=" + state.range + "&step=" + STEPS[state.range];
  }

  function statsURL() {
    var q = "?" + sinceParams();
    // A replica of a fleet (its last answer said it has a shared tier) also
    // asks for every replica's health and the fleet's totals; while those
    // cannot be read (the shared tier is down), a refresh asks again without
    // them, so that this replica's own numbers still show.
    return state.ns ? "v1/" + encodeURIComponent(state.ns) + "/stats" + q :
      "v1/stats" + q + (state.fleet && !state.skipFleet ? "&scope=fleet" : "");
  }

  function refresh() {
    if (state.inflight) return;
    state.inflight = true;
    var headers = { Accept: "application/json" };
    if (state.token) headers.Authorization = "Bearer " + state.token;
    var probing = state.fitFrom == null;
    fetch(statsURL(), { headers: headers, cache: "no-store" })
      .then(function (r) {
        return r.json().then(function (body) {
          if (!r.ok) {
            var err = new Error((body && body.error && body.error.message) || ("HTTP " + r.status));
            err.status = r.status;
            err.code = body && body.error && body.error.code;
            throw err;
          }
          return body;
        });
      })
      .then(function (d) {
        $("error-banner").hidden = true;
        $("auth-form").hidden = true;
        // Fit until the series begins at its first datum: the first
        // answer (the whole range, coarse) finds it to within a step, the
        // next (finer steps) to within a finer one, and so on.
        var refit = false, fd = d.series ? CS.charts.firstDatum(d.series) : null;
        if (d.series && fd != null && (probing || fd >= d.series.t[0] + 2 * d.series.step_seconds) && fd !== state.fitFrom) {
          refit = fd > d.series.t[0] && Date.now() / 1000 - fd < RANGES[state.range];
          state.fitFrom = fd;
        } else if (probing) {
          state.fitFrom = fd;
        }
        if (d.fleet) state.fleetDown = null;
        render(d);
        // The next refresh asks for the fleet's view again.
        state.skipFleet = false;
        setLive(true, "live · updated " + new Date().toLocaleTimeString());
        // The first answer showed where the data begin: ask again for
        // just that span, in finer steps.
        if (refit) setTimeout(refresh, 0);
      })
      .catch(function (e) {
        if (e.code === "fleet_unavailable" && !state.skipFleet) {
          // This replica still answers for itself: show that, and say in
          // the fleet card why the other replicas are not listed.
          state.fleetDown = e.message;
          state.skipFleet = true;
          setTimeout(refresh, 0); // once this one is no longer in flight
          return;
        }
        if (e.status === 401 || e.status === 403) {
          $("auth-form").hidden = false;
          $("error-banner").hidden = true;
          // The namespace menu lists namespaces only once a read of every
          // namespace has worked: before that, the address is the way in.
          var choose = $("ns-select").options.length > 1 ? "choose it above, or open " : "open ";
          $("auth-text").textContent = e.message + (state.ns ? "" :
            " Reading every namespace needs an admin token; a read token works for its own namespace: " + choose +
            location.origin + location.pathname + "?ns=NAME.");
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
    $("live").className = "live " + (ok ? "ok" : "err");
    $("live-text").textContent = text;
  }

  // renderStore fills the store card: the selected namespace's usage
  // against its quota when the server reports it, else the whole store.
  // evicted is the persisted count of the totals (the whole server's, or
  // the namespace's): the store's own counts start again at 0 with every
  // restart, while the evictions chart keeps its history.
  //
  // On a fleet replica (store.tier "shared") the card is this replica's hot
  // tier against its own --max-size, and the shared tier (the whole
  // fleet's entries, no limit) is named beside it: the bucket's bytes are
  // no share of one replica's limit.
  function renderStore(st, u, evicted) {
    var used = st.bytes, max = st.max_bytes || 0, entries = st.entries, scope = "Store size", what = "limit";
    var evictions = evicted != null ? evicted : st.evictions, evSub = "entries evicted to make room or expired";
    var hot = !u && st.tier === "shared" && st.hot, shared = "", sharedTitle = "", disk = st.disk_bytes;
    if (hot) {
      // Stats format 4 keeps the hot tier's disk use under store.hot.
      used = hot.bytes; max = hot.max_bytes || 0; entries = hot.entries; scope = "Hot tier (this replica)"; disk = hot.disk_bytes || disk;
      // Before its first listing of the bucket the replica knows only its
      // own writes (store.uncounted says why): no "0 B in 0 entries". The
      // words are `cachesvc stats`' (stats/report/compat.go).
      shared = st.uncounted ? " · shared tier: not yet listed by this replica, not counted yet (" + st.uncounted + ")" :
        " · shared tier " + bytes(st.bytes) + " in " + CS.plural(st.entries, "entry", "entries") + " (no limit)";
      // The count is this replica's last listing of the bucket plus its
      // own writes since: it lags the other replicas' writes by up to the
      // listing interval (store.list_interval_s, in the title for room),
      // and says how old it is, as `cachesvc stats` does.
      if (!st.uncounted && st.listed_at) {
        shared += ", the fleet's as this replica listed it " + CS.ago(st.listed_at) + ", plus its own writes since";
        sharedTitle = "Shared tier: the fleet's entries as this replica counted them at its last listing of the bucket (" + st.listed_at + ")" +
          (st.list_interval_s ? ", plus its own writes since (it lists the bucket " + CS.every(st.list_interval_s) + ")" : ", plus its own writes since") +
          ". Other replicas' writes since then show at its next listing.";
      }
    } else if (u) {
      used = u.bytes; max = u.max_bytes || 0; entries = u.entries; scope = "Store · " + state.ns; what = "quota";
      if (evicted == null) evictions = u.evictions + u.expirations;
      evSub = num(u.evictions) + " evicted · " + num(u.expirations) + " expired (idle or age limit)";
    } else if (state.ns) {
      scope = "Store size (whole server)";
    }
    // A long namespace name is cut to the card, with the full label as a title.
    $("kpi-store-label").textContent = scope;
    $("kpi-store-label").title = scope;
    $("kpi-store").innerHTML = bytes(used) + (max ? '<span class="of"> / ' + bytes(max) + "</span>" : "");
    var frac = max ? Math.min(1, (used || 0) / max) : 0, bar = $("kpi-store-bar");
    bar.style.width = (max ? 100 * frac : 0).toFixed(1) + "%";
    bar.className = frac > 0.95 ? "full" : frac > 0.8 ? "high" : "";
    // Disk use runs ahead of the accounted size by what value-log GC has
    // not returned to the disk yet (the whole store's only).
    $("kpi-store-sub").textContent = CS.plural(entries, "entry", "entries") + (max ? " · " + (100 * frac).toFixed(0) + "% of " + what : " · no " + (u ? "quota" : "size limit")) +
      (!u && disk ? " · " + bytes(disk) + " on disk" : "") + shared;
    $("kpi-store-sub").title = sharedTitle;
    $("kpi-evictions").textContent = num(evictions);
    $("kpi-evictions-sub").textContent = evSub;
  }

  function render(d, skipCharts) {
    state.last = d;
    var t = d.totals || {}, st = d.store || {};
    // A shared tier not listed yet may hold the other replicas' entries.
    var empty = !t.lookups && !t.writes && !st.entries && !st.uncounted;
    $("empty-state").hidden = !empty;
    $("empty-token").hidden = !state.token;
    document.body.classList.toggle("is-empty", empty);
    document.body.classList.remove("no-data");

    $("kpi-hit-rate").textContent = t.lookups ? pct(t.hit_rate) : "–";
    // The totals count raw GET misses, which the table leaves out: say so.
    var raw = CS.tables.rawMisses(d);
    $("kpi-hit-rate-sub").textContent = t.lookups ? num(t.hits) + " of " + num(t.lookups) + " lookups hit" + (raw ? " · " + num(raw) + " raw GET miss" + (raw === 1 ? "" : "es") + "\u00a0†" : "") +
      (t.wait_hits ? " · " + num(t.wait_hits) + " after waiting on a compile lease" : "") : "no lookups yet";
    // In a namespace's view the chart is its lookups, the table its backends.
    $("hit-rate-hint").textContent = state.ns ? "(all of " + state.ns + "'s lookups; each backend in the table)" :
      "(all lookups; each namespace and backend in the table)";
    $("kpi-lookups").textContent = num(t.lookups);
    $("kpi-hits").textContent = num(t.hits);
    $("kpi-misses").textContent = num(t.misses);
    // The unit that reads best (s, min, h, days), as cachesvc stats prints
    // it: a first run's seconds are not "0.00 h".
    $("kpi-saved").textContent = CS.dur(t.compile_seconds_saved || 0);
    $("kpi-saved-sub").textContent = num(Math.round((t.compile_seconds_saved || 0) * 1000) / 1000) + " s of compiling avoided";
    $("kpi-bytes-out").textContent = bytes(t.bytes_out);
    $("kpi-bytes-in").textContent = bytes(t.bytes_in);
    $("kpi-writes").textContent = num(t.writes);
    $("kpi-writes-unit").textContent = t.writes === 1 ? "write" : "writes";
    renderStore(st, state.ns ? CS.tables.usageOf(d, state.ns) : null, t.evictions);
    $("kpi-integrity").textContent = num(st.integrity_failures);
    $("kpi-integrity").parentNode.classList.toggle("alert", (st.integrity_failures || 0) > 0);
    var le = d.leases || {};
    $("kpi-leases").textContent = num(le.held);
    $("kpi-waiting").textContent = num(le.waiting);
    if (d.server && d.server.version) $("footer-version").textContent = "cachesvc " + d.server.version;

    state.fleet = !!(d.shared_tier && d.shared_tier.configured);
    CS.fleet.render(d, state.fleetDown);
    updateNamespaces(d);
    CS.tables.renderNS(d);
    CS.tables.renderQuotas(st);
    CS.runs.renderRuns(d.runs || []);
    CS.runs.renderSweeps(d.runs || []);
    CS.tables.renderTop(d.top_entries || []);
    CS.tables.renderReasons(d.miss_reasons || [], state.reason, t.misses || 0);
    CS.tables.renderMisses(d.recent_misses || [], state.reason, t.misses || 0);
    if (d.series && !skipCharts) {
      // In a namespace's view the store is the namespace's (store_scope),
      // and its limit the namespace's quota.
      var own = state.ns && (st.namespaces || []).filter(function (n) { return n.namespace === state.ns; })[0];
      var gaps = CS.charts.render(d.series, { bytes: st.bytes, max_bytes: state.ns ? (own && own.max_bytes) || 0 : st.max_bytes, tier: st.tier }, state.ns);
      // Say when the charts show less than the range chosen, and why, and
      // what their shaded steps are.
      var now = Date.now() / 1000, span = d.series.t.length ? now - d.series.t[0] : 0;
      var notes = [];
      if (span && span < RANGES[state.range] - 60 && state.fitFrom != null) notes.push("charts: the last " + CS.dur(span) + " (data since " + CS.dur(now - state.fitFrom) + " ago)");
      if (gaps) notes.push("shaded: no sample (the server was not running)");
      $("range-note").textContent = notes.join(" · ");
    }
    // Charts drawn while hidden (empty cache) get their size when shown.
    if (state.wasEmpty && !empty) CS.charts.resize();
    state.wasEmpty = empty;
  }

  function updateNamespaces(d) {
    if (state.ns) return; // the filtered view lists only one namespace
    var sel = $("ns-select"), have = {};
    for (var i = 1; i < sel.options.length; i++) have[sel.options[i].value] = true;
    (d.namespaces || []).forEach(function (n) {
      if (!have[n.namespace] && n.namespace.charAt(0) !== "_") {
        var o = document.createElement("option");
        o.value = o.textContent = n.namespace;
        sel.appendChild(o);
      }
    });
  }

  function restart() {
    if (state.timer) clearInterval(state.timer);
    state.fitFrom = null;
    refresh();
    state.timer = setInterval(refresh, REFRESH_MS);
  }

  function syncURL() {
    var p = new URLSearchParams();
    if (state.ns) p.set("ns", state.ns);
    if (state.range !== "6h") p.set("range", state.range);
    if (CS.runs.state.sweep) p.set("sweep", CS.runs.state.sweep);
    history.replaceState(null, "", location.pathname + (p.toString() ? "?" + p : ""));
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
    CS.runs.state.sweep = params.get("sweep") || "";
    Array.prototype.forEach.call(document.querySelectorAll(".server-url"), function (e) { e.textContent = BASE_URL; });
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
      if (state.last) render(state.last, true);
    });
    CS.tables.init();
    CS.runs.init(function () { syncURL(); if (state.last) render(state.last, true); });
    var pending = null;
    // The charts take the new width, and the tables are drawn again: the
    // sweep shows as many arms as the card has room for.
    window.addEventListener("resize", function () {
      clearTimeout(pending);
      pending = setTimeout(function () { CS.charts.resize(); if (state.last) render(state.last, true); }, 100);
    });
    restart();
  }

  window.cachesvcDashboard = { refresh: refresh, state: state, charts: CS.charts.all };
  init();
})();
