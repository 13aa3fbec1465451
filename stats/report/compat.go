package report

import (
	"fmt"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// The answers of servers older and newer than this build: what each format
// (wire.StatsFormat) means, so that this CLI neither mislabels an older
// server's numbers nor silently misreads a newer one's.

// renderFormatNote says when the server writes a newer format than this
// build reads: figures it added are missing here, and any whose meaning it
// changed may read wrong. Older formats are read as they were meant.
func renderFormatNote(p *printer, r *wire.StatsResponse) {
	if r.Format > wire.StatsFormat {
		p.f("Note        the server (%s) writes stats format %d, newer than this cachesvc's %d: figures it added are not shown and changed ones may read wrong; use a cachesvc of the server's version (or --json)\n\n",
			orUnknown(r.Server.Version), r.Format, wire.StatsFormat)
	}
}

// renderNamespaceStore writes the store lines of a namespace's answer.
// Whose usage r.Store is depends on the server's format: format 2 says it
// (store_scope); an older server's namespace answer carried the whole
// store beside the namespace's share (store.namespaces), except builds
// just before format 2, which already carried the namespace's own usage
// and zeroed the whole-store-only fields (blobs, disk bytes).
func renderNamespaceStore(p *printer, r *wire.StatsResponse, ns string) {
	nu, ok := namespaceUsage(r.Store, ns)
	switch {
	case r.StoreScope == wire.StoreScopeNamespace:
		if !ok {
			nu = wire.NamespaceUsage{Namespace: ns, Entries: r.Store.Entries, Bytes: r.Store.Bytes}
		}
		// A namespace's answer carries no whole-server usage: it would
		// tell its readers of other namespaces' contents.
		p.f("Store       %s\n", nsStoreLine(nu))
	case ok && (r.Store.Blobs > 0 || r.Store.DiskBytes > 0):
		p.f("Store       %s\n", nsStoreLine(nu))
		p.f("Server      %s (all namespaces)\n", storeLine(r.Store))
	case ok:
		p.f("Store       %s\n", nsStoreLine(nu))
	default:
		p.f("Store       %s (whole server: it reports no per-namespace usage)\n", storeLine(r.Store))
	}
}

// hotOf returns the hot tier's usage of a fleet replica's answer whose
// store.hot holds its evictions, disk bytes and namespaces (format 4 on),
// else nil: format 3 sent them as the outer store's.
func hotOf(r *wire.StatsResponse) *wire.StoreUsage {
	if r.Format >= 4 && r.Store.Tier == wire.StoreTierShared {
		return r.Store.Hot
	}
	return nil
}

// renderStoreTiers writes the store lines of a server's answer, u being
// its store usage (evictions adjusted). A fleet replica of format 3 on says
// which tier each figure is (store.tier, store.hot): the shared tier's
// entries and bytes, without a limit, and its own hot tier's against its
// --max-size (with its evictions: store.hot's from format 4 on, the outer
// store's in format 3). A fleet replica of an older format sent the shared
// tier's bytes with the hot tier's limit: the line says so rather than
// showing the whole bucket as a share of one replica's hot tier. asked is
// the URL of the replica that answered; now dates its listing of the
// bucket (store.listed_at).
func renderStoreTiers(p *printer, r *wire.StatsResponse, u wire.StoreUsage, asked string, now time.Time) {
	fleet := r.SharedTier != nil && r.SharedTier.Configured
	switch {
	case u.Tier == wire.StoreTierShared && u.Hot != nil:
		h := *u.Hot
		evictions := u.Evictions
		if r.Format >= 4 {
			evictions = h.Evictions
		}
		// The shared tier's count is the answering replica's: its last
		// listing of the bucket plus its own writes since, so it lags the
		// other replicas' writes (by up to the listing's 10 minutes). In
		// fleet scope the line names that replica, not "the fleet".
		who, hotOn, every := "this replica", "on this replica", ""
		if r.Fleet != nil {
			who, hotOn, every = asked, "on "+asked+", the replica asked", " (every replica's: HOT TIER below)"
		}
		integrity := Plural(u.IntegrityFailures, "integrity failure", "integrity failures")
		switch {
		case u.Uncounted != "":
			// Before its first listing of the bucket a replica knows
			// only its own writes: "0 B in 0 entries" read as an empty
			// bucket.
			p.f("Shared tier: not yet listed by %s, not counted yet (%s); %s\n", who, u.Uncounted, integrity)
		case !u.ListedAt.IsZero():
			// The listing's age, as the dashboard's store card gives
			// it: how far behind the other replicas' writes it may be.
			p.f("Shared tier %s in %s (no limit), the fleet's as %s listed it %s, plus its own writes since%s; %s\n",
				Bytes(u.Bytes), Plural(u.Entries, "entry", "entries"), who, Ago(now, u.ListedAt), listsEvery(u.ListInterval), integrity)
		default: // a server before store.listed_at: no age to give
			p.f("Shared tier %s in %s (no limit), the fleet's as %s last counted them (its last listing of the bucket, plus its own writes since); %s\n",
				Bytes(u.Bytes), Plural(u.Entries, "entry", "entries"), who, integrity)
		}
		p.f("Hot tier    %s in %s %s (%s); %s%s\n", Bytes(h.Bytes), Plural(h.Entries, "entry", "entries"), hotOn, limitText(h),
			Plural(evictions, "eviction", "evictions"), every)
	case u.Tier == "" && fleet:
		hot := "no limit"
		if u.MaxBytes > 0 {
			hot = "limit " + Bytes(u.MaxBytes)
		}
		p.f("Store       %s in %s in the shared tier (this older server does not report its hot tier's usage; hot tier %s); %s, %s\n",
			Bytes(u.Bytes), Plural(u.Entries, "entry", "entries"), hot,
			Plural(u.Evictions, "eviction", "evictions"), Plural(u.IntegrityFailures, "integrity failure", "integrity failures"))
	default:
		p.f("Store       %s\n", storeLine(u))
	}
}

// limitText is a store's limit and how much of it is used.
func limitText(u wire.StoreUsage) string {
	if u.MaxBytes <= 0 {
		return "no limit"
	}
	return fmt.Sprintf("limit %s, %.0f%% used", Bytes(u.MaxBytes), 100*float64(u.Bytes)/float64(u.MaxBytes))
}

// orUnknown is v, or "version unknown" when empty.
func orUnknown(v string) string {
	if v == "" {
		return "version unknown"
	}
	return v
}

// listsEvery says how often the replica lists the shared tier's bucket,
// from store.list_interval_s: " (it lists the bucket every 10 minutes)",
// or "" from a server that does not say (the dashboard says the same).
func listsEvery(sec float64) string {
	if sec <= 0 {
		return ""
	}
	return " (it lists the bucket " + every(time.Duration(sec*float64(time.Second))) + ")"
}

// every renders an interval in its largest whole unit: "every 10
// minutes", "every hour", "every 90 seconds".
func every(d time.Duration) string {
	n, unit := int64(d.Round(time.Second)/time.Second), "second"
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		n, unit = int64(d/time.Hour), "hour"
	case d >= time.Minute && d%time.Minute == 0:
		n, unit = int64(d/time.Minute), "minute"
	}
	if n == 1 {
		return "every " + unit
	}
	return "every " + Num(n) + " " + unit + "s"
}
