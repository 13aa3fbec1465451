// cachesvc dashboard: the fleet card (CS.fleet): this replica's shared tier
// and, with ?scope=fleet, every replica's health and numbers and the
// fleet's totals.
(function () {
  "use strict";
  var CS = window.CS, $ = CS.$, esc = CS.esc, num = CS.num, bytes = CS.bytes;

  function sharedCell(sh) {
    if (!sh || !sh.configured) return '<span class="muted">none</span>';
    if (sh.reachable) return '<span class="health ok">reachable</span>';
    return '<span class="health bad" title="' + esc(sh.last_error) + '">unreachable</span>';
  }

  // meaning says what replicas that disagree on a setting do wrong.
  var meaning = {
    max_entry_size: "an upload one replica refuses (413) another stores: give every replica the same --max-entry-size",
    plugins: "one signature gets different keys on different replicas (misses): load the same plugin files everywhere",
    namespaces: "quotas and expiry differ by replica: give every replica the same --namespaces file",
    tokens: "a token one replica accepts another refuses (401, or 403 for a changed scope): give every replica the same --tokens file and SIGHUP them all",
    signing_key: "clients that check signatures refuse what the other replicas sign: give every replica the same --signing-key, and clients its public key"
  };

  // mismatches fills the card's warnings: one per setting on which the
  // live replicas disagree (fleet.config_mismatches), each value with its
  // replicas.
  function mismatches(f) {
    var ms = (f && f.config_mismatches) || [], el = $("fleet-mismatches");
    el.hidden = !ms.length;
    el.innerHTML = ms.map(function (m) {
      return '<li data-setting="' + esc(m.setting) + '"><strong>Replicas disagree on ' + esc(m.setting) + "</strong>: " + esc(meaning[m.setting] || "") +
        '<div class="vals">' + m.values.map(function (v) {
          var val = m.setting === "max_entry_size" && /^\d+$/.test(v.value) ? bytes(Number(v.value)) : v.value;
          return esc(val) + ": " + esc(v.replicas.join(", "));
        }).join(" · ") + "</div></li>";
    }).join("");
  }

  // render fills the card from a stats answer d; fleetDown, when set, is
  // why the fleet's view could not be read (d is then this replica's alone).
  function render(d, fleetDown) {
    var card = $("fleet-card");
    var sh = d.shared_tier;
    card.hidden = !(sh && sh.configured);
    if (card.hidden) return;
    var f = d.fleet, reps = (f && f.replicas) || [];
    mismatches(f);
    var ft = (f && f.totals && f.totals.totals) || {};
    $("fleet-summary").innerHTML = "shared tier " + sharedCell(sh) + (sh.queue_depth ? " · " + num(sh.queue_depth) + " uploads queued" : "") +
      (f ? " · " + num(f.healthy) + " of " + num(reps.length) + " replicas healthy · fleet: " + num(ft.hits) + " of " + num(ft.lookups) +
        " lookups hit, " + CS.dur(ft.compile_seconds_saved || 0) + " saved" : "") +
      (fleetDown ? ' · <span class="health bad" title="' + esc(fleetDown) + '">fleet view unavailable</span>' : "");
    $("fleet-table").tBodies[0].innerHTML = reps.length ? reps.map(function (r) {
      var t = r.totals || {}, hot = r.hot || {};
      return '<tr data-replica="' + esc(r.id) + '"><td class="name" title="' + esc(r.id) + '">' + (r.url ? '<a href="' + esc(r.url) + '/">' + esc(r.id) + "</a>" : esc(r.id)) +
        '</td><td><span class="health ' + (r.health === "ok" ? "ok" : "bad") + '">' + esc(r.health) + "</span></td><td>" + esc(CS.ago(r.heartbeat)) +
        "</td><td>" + esc(r.version) + '</td><td class="num">' + bytes(hot.bytes) + " · " + num(hot.entries) + "</td><td>" + sharedCell(r.shared) +
        '</td><td class="num">' + num((r.shared || {}).queue_depth) + '</td><td class="num">' + num(t.lookups) + "</td><td>" + CS.rateCell(t.hit_rate, t.lookups) + "</td></tr>";
    }).join("") : '<tr><td colspan="9" class="none">' + (fleetDown ? "Cannot read the replicas' heartbeats: " + esc(fleetDown) +
      " This replica's own numbers are shown; the list comes back with the shared tier." :
      "No heartbeats read yet (replicas write one every 10 s).") + "</td></tr>";
  }

  CS.fleet = { render: render };
})();
