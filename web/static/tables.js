// cachesvc dashboard: the namespace and backend table with sparklines
// (sortable), top entries, and the misses panel (CS.tables).
(function () {
  "use strict";
  var CS = window.CS, $ = CS.$, esc = CS.esc, num = CS.num, dur = CS.dur, bytes = CS.bytes;
  var UNKNOWN = "unknown"; // stats.UnknownBackend: a GET by key that named no backend
  var RAW_TIP = "GETs by key that missed without an X-Cachesvc-Backend header: no compiler is known for them " +
    "(a probe, or a client that does not name its backend), so they are left out of this namespace's hit rate and shown here.";
  var sort = { key: "name", desc: false };
  // A namespace's backend rows are shown when the table lists at most
  // OPEN_UP_TO namespaces, or when its row was clicked open.
  var OPEN_UP_TO = 5, toggled = {};
  var last = null;

  // split returns a namespace's (or the server's) totals without the raw
  // GET misses, which are counted apart; known are the named backends.
  function split(n) {
    var bs = n.backends || [], known = [], raw = 0;
    bs.forEach(function (b) { if (b.backend === UNKNOWN) raw = b.misses; else known.push(b); });
    // Hits on entries stored without a backend stay in the totals.
    var lookups = n.lookups - raw;
    return { known: known, raw: raw, t: Object.assign({}, n, { lookups: lookups, misses: n.misses - raw, hit_rate: lookups ? n.hits / lookups : 0 }) };
  }

  // nsUsage is the namespaces' usage against their quotas: on a fleet
  // replica its hot tier's (store.hot.namespaces from stats format 4 on,
  // where quotas apply), else the store's.
  function nsUsage(st) {
    return (st.hot && st.hot.namespaces) || st.namespaces || [];
  }

  function usageOf(d, ns) {
    var us = nsUsage(d.store || {});
    for (var i = 0; i < us.length; i++) if (us[i].namespace === ns) return us[i];
    return null;
  }

  function usageCell(u) {
    if (!u) return '<td class="usage-cell"><span class="muted">–</span></td>';
    var tip = CS.plural(u.entries, "entry", "entries") + " · " + num(u.evictions) + " evicted · " + num(u.expirations) + " expired" +
      (u.max_entries ? " · at most " + CS.plural(u.max_entries, "entry", "entries") : "") + (u.max_idle_s ? " · idle limit " + dur(u.max_idle_s) : "") +
      (u.max_age_s ? " · age limit " + dur(u.max_age_s) : "");
    if (!u.max_bytes && u.max_entries) return '<td class="usage-cell">' + CS.meter(u.entries, u.max_entries, function (v) { return CS.plural(v, "entry", "entries"); }, tip) + "</td>";
    return '<td class="usage-cell">' + CS.meter(u.bytes, u.max_bytes, bytes, tip) + "</td>";
  }

  function cells(c, spark, label) {
    return '<td class="num">' + num(c.lookups) + '</td><td class="num">' + num(c.hits) + '</td><td class="num">' + num(c.misses) +
      "</td><td>" + CS.rateCell(c.hit_rate, c.lookups) + '</td><td class="spark-cell col-trend">' + (spark === false ? "" : CS.sparkline(spark, label)) +
      '</td><td class="num">' + dur(c.compile_seconds_saved) + '</td><td class="num col-served">' + bytes(c.bytes_out) + '</td><td class="num col-writes">' + num(c.writes) + "</td>";
  }

  function keyOf(r) {
    var t = r.t;
    switch (sort.key) {
      case "name": return r.name;
      case "rate": return t.lookups ? t.hit_rate : -1;
      case "saved": return t.compile_seconds_saved;
      case "served": return t.bytes_out;
      case "store": return r.usage ? r.usage.bytes : -1;
      default: return t[sort.key] || 0;
    }
  }
  function sorted(rows) {
    return rows.sort(function (a, b) {
      var x = keyOf(a), y = keyOf(b), c = x < y ? -1 : x > y ? 1 : 0;
      return (sort.desc ? -c : c) || (a.name < b.name ? -1 : 1);
    });
  }

  // renderNS draws the namespaces (with their backends and raw GET misses
  // under them) and then the backends across namespaces.
  function renderNS(d) {
    last = d;
    var s = d.series || {}, out = [], anyRaw = false;
    var nss = sorted((d.namespaces || []).map(function (n) {
      var sp = split(n);
      return { name: n.namespace, t: sp.t, known: sp.known, raw: sp.raw, usage: usageOf(d, n.namespace) };
    }));
    if (nss.length) out.push('<tr class="group"><th colspan="12">Namespaces · ' + num(nss.length) + "</th></tr>");
    nss.forEach(function (r) {
      var ks = r.known, ns = esc(r.name), subs = ks.length > 1 || r.raw > 0;
      var open = subs && (nss.length <= OPEN_UP_TO) !== !!toggled[r.name];
      out.push('<tr class="ns-row' + (subs ? (open ? " open" : " closed") : "") + '" data-ns="' + ns + '"' +
        (subs ? ' title="Click to ' + (open ? "hide" : "show") + ' its backends"' : "") + '><td class="name" title="' + ns + '">' + ns + "</td><td>" +
        (ks.length === 1 ? esc(ks[0].backend) : ks.length ? "all (" + ks.length + ")" : "–") + "</td>" +
        cells(r.t, (s.namespaces || {})[r.name] || (s.namespace === r.name ? s.total : null), "Hit rate (line) and lookups (bars) of " + r.name + " over the range") + usageCell(r.usage) + "</tr>");
      if (r.raw) anyRaw = true;
      if (!open) return;
      if (ks.length > 1) ks.forEach(function (b) {
        out.push('<tr class="sub" data-ns="' + ns + '" data-backend="' + esc(b.backend) + '"><td></td><td>' + esc(b.backend) + "</td>" + cells(b, false) + "<td></td></tr>");
      });
      if (r.raw) {
        out.push('<tr class="sub raw" data-ns="' + ns + '" title="' + esc(RAW_TIP) + '"><td></td><td>raw GET misses †</td><td class="num">' + num(r.raw) +
          '</td><td class="num">0</td><td class="num">' + num(r.raw) + '</td><td><span class="muted">not counted</span></td><td colspan="6"></td></tr>');
      }
    });
    var counts = {};
    (d.namespaces || []).forEach(function (n) { (n.backends || []).forEach(function (b) { counts[b.backend] = (counts[b.backend] || 0) + 1; }); });
    var all = split({ backends: d.backends || [], lookups: 0, misses: 0, hits: 0 });
    var bes = sorted(all.known.map(function (b) { return { name: b.backend, t: b }; }));
    if (bes.length > 1 || all.raw) {
      out.push('<tr class="group"><th colspan="12">Backends · ' + num(bes.length) + "</th></tr>");
      bes.forEach(function (r) {
        out.push('<tr class="be-row" data-backend="' + esc(r.name) + '"><td>' + esc(r.name) + '</td><td class="muted">' + num(counts[r.name]) +
          " namespace" + (counts[r.name] === 1 ? "" : "s") + "</td>" + cells(r.t, (s.backends || {})[r.name], "Hit rate (line) and lookups (bars) of " + r.name + " over the range") + "<td></td></tr>");
      });
      if (all.raw) {
        anyRaw = true;
        out.push('<tr class="be-row raw" data-backend="' + UNKNOWN + '" title="' + esc(RAW_TIP) + '"><td>raw GET misses †</td><td class="muted">no backend</td><td class="num">' +
          num(all.raw) + '</td><td class="num">0</td><td class="num">' + num(all.raw) + '</td><td><span class="muted">not counted</span></td><td colspan="6"></td></tr>');
      }
    }
    $("ns-table").tBodies[0].innerHTML = out.length ? out.join("") : '<tr><td colspan="12" class="none">No lookups yet.</td></tr>';
    $("ns-footnote").hidden = !anyRaw;
    CS.markSort($("ns-table"), sort);
  }

  function renderTop(es) {
    $("top-table").tBodies[0].innerHTML = es.length ? es.map(function (e) {
      var full = (e.name ? e.name + " " : "") + e.key;
      return '<tr data-key="' + esc(e.key) + '"><td class="name" title="' + esc(full) + '">' + (e.name ? esc(e.name) + " " : "") +
        '<span class="mono">' + esc(e.key.slice(0, 12)) + "…</span></td><td class=\"name ns\" title=\"" + esc(e.namespace) + '">' + esc(e.namespace) + '</td><td class="num">' + dur(e.compile_seconds) +
        '</td><td class="num">' + num(e.hits) + '</td><td class="num">' + dur(e.seconds_saved) + "</td></tr>";
    }).join("") : '<tr><td colspan="5" class="none">No hits yet.</td></tr>';
  }

  // BY_KEY says why a miss can have no reason: the lookups by key carry
  // no signature to compare with what is stored (api/keys.go explains
  // lookups by signature only).
  var BY_KEY = "lookups by key (GET, batch or Redis), which carry no signature to compare with the entries stored. " +
    "Lookups by signature (POST /v1/{ns}/lookup, as the cachesvc JAX and torch clients make them) explain every miss.";

  // renderReasons lists the explained misses by reason; misses is the
  // totals' count, so that a page of misses none of which could be
  // explained says why rather than that there are none.
  function renderReasons(rs, selected, misses) {
    var total = rs.reduce(function (a, r) { return a + r.count; }, 0);
    $("reasons").innerHTML = rs.length ? rs.map(function (r) {
      var sel = selected === r.reason ? " selected" : "";
      return '<div class="reason' + sel + '" data-reason="' + esc(r.reason) + '" title="Show only these misses"><span class="label">' + esc(r.label) +
        '</span><span class="bar"><i style="width:' + (100 * r.count / total).toFixed(1) + '%"></i></span><span class="count">' + num(r.count) + "</span></div>";
    }).join("") : misses ? '<div class="none">None of the ' + num(misses) + " misses is explained: they were " + esc(BY_KEY) + "</div>" :
      '<div class="none">No explained misses yet. Lookups by signature (POST /v1/{ns}/lookup) explain every miss.</div>';
  }

  function labelOf(reason) {
    if (!reason) return "unexplained";
    return reason.split("+").join(", ").replace(/_/g, " ");
  }

  // renderMisses lists the recent explained misses (of reason, when one
  // is picked); misses is the totals' count, as for renderReasons.
  function renderMisses(ms, reason, misses) {
    if (reason) ms = ms.filter(function (m) { return (m.explanation || {}).reason === reason; });
    $("miss-filter").textContent = reason ? "· " + labelOf(reason) + " (click again for all)" : "";
    $("recent-misses").innerHTML = ms.length ? ms.slice(0, 30).map(function (m) {
      var ex = m.explanation || {};
      var near = (ex.nearest && ex.nearest[0]) || null;
      var diffs = near ? near.diffs.slice(0, 4).map(function (df) {
        return "<div><b>" + esc(df.component) + "</b>: " + esc(df.want || "∅") + " → stored " + esc(df.have || "∅") + "</div>";
      }).join("") : "";
      return '<div class="miss" data-reason="' + esc(ex.reason) + '"><div class="head"><span class="tag">' + esc(labelOf(ex.reason)) + "</span><span>" +
        esc(m.display_name || m.key.slice(0, 16)) + '</span><span class="mono">' + esc(m.namespace) + " · " + esc(m.backend) + '</span><span class="when">' + esc(CS.ago(m.time)) +
        '</span></div><div class="summary">' + esc(ex.summary || "") + '</div><div class="diffs">' + diffs + "</div></div>";
    }).join("") : misses && !reason ? '<div class="none">None to list: only the misses of lookups by signature are recorded here (see by reason).</div>' :
      '<div class="none">No misses recorded.</div>';
  }

  // rawMisses counts the raw GET misses in d (every namespace's, or the
  // one namespace's in a scoped answer).
  function rawMisses(d) {
    return split({ backends: d.backends || [], lookups: 0, misses: 0, hits: 0 }).raw;
  }

  // renderQuotas fills the quotas card: each namespace's usage of this
  // server's store against its quota (serve --namespaces), its expiry and
  // what the store removed, from store.namespaces (store.hot.namespaces on
  // a fleet replica).
  function renderQuotas(st) {
    var nss = nsUsage(st);
    $("quota-card").hidden = !nss.length;
    $("quota-table").tBodies[0].innerHTML = nss.map(function (n) {
      var fill = Math.max(n.max_bytes ? n.bytes / n.max_bytes : 0, n.max_entries ? n.entries / n.max_entries : 0);
      var exp = [];
      if (n.max_idle_s) exp.push("idle " + CS.dur(n.max_idle_s));
      if (n.max_age_s) exp.push("age " + CS.dur(n.max_age_s));
      var cls = fill > 0.95 ? " low" : fill > 0.8 ? " mid" : "";
      var of = n.max_bytes || n.max_entries ? '<span class="rate' + cls + '"><span class="bar"><i style="width:' + (100 * Math.min(1, fill)).toFixed(1) + '%"></i></span>' + CS.pct(fill) + "</span>" :
        '<span class="none">no quota</span>';
      return '<tr data-ns="' + esc(n.namespace) + '"><td class="name" title="' + esc(n.namespace) + '">' + esc(n.namespace) + '</td><td class="num">' + CS.num(n.entries) +
        (n.max_entries ? " / " + CS.num(n.max_entries) : "") + '</td><td class="num">' + CS.bytes(n.bytes) + (n.max_bytes ? " / " + CS.bytes(n.max_bytes) : "") +
        "</td><td>" + of + "</td><td>" + (exp.length ? esc(exp.join(" · ")) : '<span class="none">never</span>') + '</td><td class="num">' + CS.num(n.evictions) +
        '</td><td class="num">' + CS.num(n.expirations) + "</td></tr>";
    }).join("");
  }

  CS.tables = {
    renderNS: renderNS, renderQuotas: renderQuotas, rawMisses: rawMisses, renderTop: renderTop, renderReasons: renderReasons, renderMisses: renderMisses, usageOf: usageOf,
    init: function () {
      CS.sortable($("ns-table"), sort, function () { if (last) renderNS(last); });
      $("ns-table").tBodies[0].addEventListener("click", function (e) {
        var tr = e.target.closest("tr.ns-row.open, tr.ns-row.closed");
        if (!tr) return;
        var ns = tr.getAttribute("data-ns");
        toggled[ns] = !toggled[ns];
        if (last) renderNS(last);
      });
    },
  };
})();
