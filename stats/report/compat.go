package report

import "github.com/cachesvc/cachesvc/wire"

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

// orUnknown is v, or "version unknown" when empty.
func orUnknown(v string) string {
	if v == "" {
		return "version unknown"
	}
	return v
}
