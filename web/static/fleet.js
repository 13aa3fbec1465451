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

  // render fills the card from a stats answer d; fleetDown, when set, is
  // why the fleet's view could not be read (d is then this replica's alone).
  function render(d, fleetDown) {
    var card = $("fleet-card");
    var sh = d.shared_tier;
    card.hidden = !(sh && sh.configured);
    if (card.hidden) return;
    var f = d.fleet, reps = (f && f.replicas) || [];
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
