// cachesvc dashboard: the runs table and the sweep view, which shows the
// arms of one sweep side by side (CS.runs).
//
// A sweep is the runs whose ids share everything up to their last ":" or
// "@", or, in an id with neither, up to its last "+", ".", "_" or "-":
// "lr-sweep:lr-1e-3" and "lr-sweep:lr-3e-4" are arms "lr-1e-3" and
// "lr-3e-4" of "lr-sweep", "sweep-1" and "sweep-2" arms of "sweep". A
// prefix shared by one run only is no sweep. Run ids are what
// clients send in X-Cachesvc-Run (CACHESVC_RUN), so a sweep's launcher
// names its arms SWEEP:ARM.
(function () {
  "use strict";
  var CS = window.CS, $ = CS.$, esc = CS.esc, num = CS.num, dur = CS.dur;
  // MAX_ARMS is the most arms shown side by side; the newest are shown. A
  // narrower card shows fewer, so that each arm's column keeps ARM_PX for
  // its figures (1,234,567 and 955.2 days fit) beside the labels' column
  // (LABEL_EM, as style.css sets it) rather than scroll sideways.
  var MAX_ARMS = 8, ARM_PX = 96, LABEL_EM = 11;
  var state = { sweep: "", onPick: null };

  function sweepOf(run) {
    var m = /^(.+)[:@][^:@]+$/.exec(run) || /^(.+)[+._-][^+._-]+$/.exec(run);
    return m ? m[1] : "";
  }

  // sweeps groups runs by sweepOf, keeping groups of two or more, the most
  // recently active first.
  function sweeps(runs) {
    var by = {}, order = [];
    runs.forEach(function (r) {
      var s = sweepOf(r.run);
      if (!s) return;
      if (!by[s]) { by[s] = []; order.push(s); }
      by[s].push(r);
    });
    return order.filter(function (s) { return by[s].length > 1; }).map(function (s) {
      var arms = by[s].slice().sort(function (a, b) { return a.run < b.run ? -1 : 1; });
      return { name: s, arms: arms };
    });
  }

  function firstHit(r) {
    if (!r.first_hit) return null;
    return Math.max(0, (Date.parse(r.first_hit) - Date.parse(r.first_seen)) / 1000);
  }

  function renderRuns(runs) {
    $("runs-table").tBodies[0].innerHTML = runs.length ? runs.map(function (r) {
      var nss = (r.namespaces || []).join(", "), fh = firstHit(r), sw = sweepOf(r.run);
      return '<tr data-run="' + esc(r.run) + '"' + (sw ? ' data-sweep="' + esc(sw) + '"' : "") + '><td class="run">' + esc(r.run) +
        '</td><td class="name" title="' + esc(nss) + '">' + esc(nss) + '</td><td class="num">' + num(r.lookups) + '</td><td class="num">' + num(r.hits) + "</td><td>" +
        CS.rateCell(r.hit_rate, r.lookups) + '</td><td class="num" title="' + esc(r.compile_seconds_saved) + ' s">' + dur(r.compile_seconds_saved) +
        '</td><td class="num">' + (fh == null ? '<span class="muted">no hit</span>' : dur(fh)) + "</td><td>" + esc(CS.ago(r.last_seen)) + "</td></tr>";
    }).join("") : '<tr><td colspan="8" class="none">No run ids seen yet. Set CACHESVC_RUN (or the X-Cachesvc-Run header) to compare the runs of a sweep.</td></tr>';
  }

  // The sweep view's rows: label, value of an arm, the better end ("max",
  // "min" or "" for none) and the formatter.
  var ROWS = [
    ["Lookups", function (r) { return r.lookups; }, "", num],
    ["Compiles avoided (hits)", function (r) { return r.hits; }, "max", num],
    // A process that waited out another's compile lease missed first, then
    // hit with ?wait= (wait_hits): that miss compiled nothing.
    ["Compiles run (misses − lease waits)", function (r) { return Math.max(0, r.misses - (r.wait_hits || 0)); }, "min", num],
    ["Hit rate", function (r) { return r.lookups ? r.hit_rate : null; }, "max", CS.pct],
    ["Compile time saved", function (r) { return r.compile_seconds_saved; }, "max", dur],
    ["Time to first hit", firstHit, "min", dur],
    ["Namespaces", function (r) { return (r.namespaces || []).join(", "); }, "", String],
    ["Started", function (r) { return CS.ago(r.first_seen); }, "", String],
    ["Last seen", function (r) { return CS.ago(r.last_seen); }, "", String],
  ];

  // bestText returns the text of the best of a row's values vs (dir
  // "max" or "min"; fmt formats them), to be marked on every arm that
  // shows it, or null when there is nothing to mark: a row without a
  // better end or a value, or one where every arm shows the best (arms
  // that tie all round beat none, and marking them all says nothing).
  // Arms are compared as shown, so that two arms showing "75.0%" are
  // both marked or neither is; an arm without a value ("–") is beaten.
  function bestText(vs, dir, fmt) {
    if (!dir) return null;
    var best = null;
    vs.forEach(function (v) { if (v != null && (best == null || (dir === "max" ? v > best : v < best))) best = v; });
    if (best == null) return null;
    var text = fmt(best);
    return vs.every(function (v) { return v != null && fmt(v) === text; }) ? null : text;
  }

  // armsThatFit is how many arms the sweep card has room for: at least
  // two (a sweep is two arms or more), at most MAX_ARMS. The card is shown
  // before this is asked; while the page is hidden it measures 0, and then
  // MAX_ARMS it is, until the next refresh.
  function armsThatFit() {
    var box = $("sweep-table").parentNode.clientWidth;
    if (!box) return MAX_ARMS;
    var label = LABEL_EM * parseFloat(getComputedStyle($("sweep-table")).fontSize);
    return Math.max(2, Math.min(MAX_ARMS, Math.floor((box - label) / ARM_PX)));
  }

  function renderSweeps(runs) {
    var all = sweeps(runs), card = $("sweep-card");
    card.hidden = !all.length;
    if (!all.length) return;
    var pick = $("sweep-select"), names = all.map(function (s) { return s.name; });
    if (pick.getAttribute("data-names") !== names.join("\n")) {
      pick.innerHTML = names.map(function (n) { return '<option value="' + esc(n) + '">' + esc(n) + "</option>"; }).join("");
      pick.setAttribute("data-names", names.join("\n"));
    }
    var sw = all.filter(function (s) { return s.name === state.sweep; })[0] || all[0];
    pick.value = sw.name;
    var arms = sw.arms, fit = armsThatFit();
    if (arms.length > fit) {
      arms = arms.slice().sort(function (a, b) { return Date.parse(b.last_seen) - Date.parse(a.last_seen); }).slice(0, fit)
        .sort(function (a, b) { return a.run < b.run ? -1 : 1; });
    }
    $("sweep-summary").textContent = num(sw.arms.length) + " arms" + (arms.length < sw.arms.length ? " · the " + fit + " most recent shown" +
      (fit < MAX_ARMS ? " (a wider window shows up to " + MAX_ARMS + ")" : "") : "");
    var head = "<tr><th>Arm</th>" + arms.map(function (r) {
      var arm = r.run.slice(sw.name.length + 1);
      return '<th class="num" data-run="' + esc(r.run) + '" title="' + esc(r.run) + '">' + esc(arm) + "</th>";
    }).join("") + "</tr>";
    var body = ROWS.map(function (row) {
      var vs = arms.map(row[1]), best = bestText(vs, row[2], row[3]);
      return "<tr><th>" + esc(row[0]) + "</th>" + vs.map(function (v) {
        var text = v == null ? "–" : row[3](v);
        // Text rows are cut to the column, with the full text as a title.
        if (row[3] === String) return '<td class="name" title="' + esc(text) + '">' + esc(text) + "</td>";
        return '<td class="num' + (best != null && text === best ? " best" : "") + '">' + esc(text) + "</td>";
      }).join("") + "</tr>";
    }).join("");
    $("sweep-table").tHead.innerHTML = head;
    $("sweep-table").tBodies[0].innerHTML = body;
  }

  CS.runs = {
    state: state, sweepOf: sweepOf, renderRuns: renderRuns, renderSweeps: renderSweeps,
    init: function (onPick) {
      $("sweep-select").addEventListener("change", function (e) { state.sweep = e.target.value; onPick(); });
      // Clicking a run of a sweep opens the sweep view on it.
      $("runs-table").tBodies[0].addEventListener("click", function (e) {
        var tr = e.target.closest("tr[data-sweep]");
        if (!tr) return;
        state.sweep = tr.getAttribute("data-sweep");
        onPick();
        $("sweep-card").scrollIntoView({ block: "nearest" });
      });
    },
  };
})();
