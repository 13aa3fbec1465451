package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/explain"
	"github.com/cachesvc/cachesvc/stats"
)

// Outcomes receives what the handlers served, each outcome exactly once:
// the server's statistics and its Prometheus counters are both fed from
// it, so no handler counts anything itself. Implementations must not block
// on I/O.
type Outcomes interface {
	// Lookup reports one lookup of an entry: a hit or a miss.
	Lookup(Lookup)
	// Write reports one upload's result.
	Write(Write)
}

// Lookup routes: which API answered a lookup.
const (
	RouteEntries = "entries" // GET /v1/{ns}/entries/{key}
	RouteLookup  = "lookup"  // POST /v1/{ns}/lookup
	RouteBatch   = "batch"   // POST /v1/{ns}/batch
	RouteRESP    = "resp"    // GET and MGET on the Redis-protocol listener (api/resp)
)

// Lookup is one lookup's outcome. Its strings come from the validated
// request value or from the stored entry, never from raw headers.
type Lookup struct {
	// Route is RouteEntries, RouteLookup, RouteBatch or RouteRESP.
	Route     string
	Namespace string
	Key       cachekey.Key
	// Run is the client's run id, "" for none.
	Run string
	// Anonymous marks a lookup that the tokens file's anonymous rule
	// authorized (no token). The statistics count its Run under _other: a
	// request without a token neither takes one of the bounded run slots
	// (stats.Config.MaxRuns; anyone who can reach the server could cycle
	// the real runs out) nor adds to a tracked run (a run id is no secret,
	// so anyone could skew a team's run and sweep views). Its lookups
	// still count in every total.
	Anonymous bool
	// Writer marks a lookup by a caller that may write in Namespace (see
	// request.Writer): it admits the namespace into the statistics, as the
	// caller's PUT would, so that a fresh namespace's first misses count
	// under its name. A read-only caller's lookups admit nothing, so made-up
	// namespaces cannot push the real ones out of the bounded rows.
	Writer bool
	// Backend is the entry's (on a hit) or the signature's backend; "" when
	// not known.
	Backend string
	// Name is the entry's or the signature's display name.
	Name string
	Hit  bool
	// Partial marks a hit that served only part of the entry (a Range) or
	// only revalidated it (304): a hit, with its bytes, that saves no
	// compile.
	Partial bool
	// Bytes is how many entry bytes the response carries.
	Bytes int64
	// CompileSeconds is the entry's compile time, saved by a full hit.
	CompileSeconds float64
	// Waited marks a hit of GET ?wait=, which a client sends after missing
	// the entry and finding its compile lease held: the hit answers that
	// earlier miss, so it counts in the totals' wait_hits too.
	Waited bool
	// WaitSeconds is how long a Waited hit parked before the entry came:
	// its client's wall time spent waiting, which the hit did not save.
	WaitSeconds float64
	// Components are the missed signature's components (lookup by
	// signature), for explaining the miss; nil otherwise.
	Components map[string]string
	// Explanation, when set, is why the miss happened; it is kept among the
	// namespace's recent misses.
	Explanation *explain.Explanation
}

// Write results: what an upload did.
const (
	WriteCreated        = "created"
	WriteExists         = "exists"
	WriteConflict       = "conflict"
	WriteDigestMismatch = "digest_mismatch"
	WriteTooLarge       = "too_large"
	WriteFull           = "full"
	WriteQuota          = "quota_exceeded" // the namespace's quota refused it
	WriteQueueFull      = "queue_full"     // write mode behind: the upload queue is full
	WriteIncomplete     = "incomplete"
	WriteError          = "error"
)

// Write is one upload's outcome.
type Write struct {
	// Result is one of the Write* results.
	Result    string
	Namespace string
	Key       cachekey.Key
	Run       string
	Backend   string
	Name      string
	// Bytes is the entry's size when stored (created or exists).
	Bytes          int64
	CompileSeconds float64
	// Components of the signature that produced the key, for explaining
	// later misses; nil for none.
	Components map[string]string
}

// counter is the server's Outcomes: the persisted statistics, the
// Prometheus counters that only this process keeps (uploads by result,
// lookups by route) and, in a fleet, the access log of entries served.
type counter struct {
	stats   *stats.Stats
	touch   func(ns string, key cachekey.Key) // the fleet's access log; nil without one
	puts    *prometheus.CounterVec            // result
	byRoute *prometheus.CounterVec            // route, result
	// routeHits and routeMisses are byRoute's series, resolved once: a
	// lookup does not hash its labels.
	routeHits, routeMisses map[string]prometheus.Counter
}

var _ Outcomes = (*counter)(nil)

// newCounter registers the process counters on reg.
func newCounter(st *stats.Stats, touch func(string, cachekey.Key), reg prometheus.Registerer) (*counter, error) {
	c := &counter{
		stats: st,
		touch: touch,
		puts: withSeries(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cachesvc_puts_total",
			Help: "Entry uploads by result: created, exists, conflict, digest_mismatch, too_large, full, quota_exceeded, queue_full, incomplete, error.",
		}, []string{"result"}), WriteCreated, WriteExists, WriteConflict, WriteDigestMismatch, WriteTooLarge, WriteFull,
			WriteQuota, WriteQueueFull, WriteIncomplete, WriteError),
		byRoute: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cachesvc_lookups_by_route_total",
			Help: "Entry lookups since the process started, by the route that answered (entries, lookup, batch, resp) and result (hit or miss). The persisted totals by namespace and backend are cachesvc_lookups_total.",
		}, []string{"route", "result"}),
	}
	for _, col := range []prometheus.Collector{c.puts, c.byRoute} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	c.routeHits, c.routeMisses = map[string]prometheus.Counter{}, map[string]prometheus.Counter{}
	for _, r := range []string{RouteEntries, RouteLookup, RouteBatch, RouteRESP} {
		c.routeHits[r] = c.byRoute.WithLabelValues(r, "hit")
		c.routeMisses[r] = c.byRoute.WithLabelValues(r, "miss")
	}
	return c, nil
}

// Lookup counts a lookup in the statistics and by route.
func (c *counter) Lookup(l Lookup) {
	series := c.routeMisses
	if l.Hit {
		series = c.routeHits
	}
	if ctr, ok := series[l.Route]; ok { // Route is one of the Route* constants
		ctr.Inc()
	}
	if l.Hit && c.touch != nil {
		c.touch(l.Namespace, l.Key)
	}
	run := l.Run
	if l.Anonymous && run != "" {
		run = stats.Other
	}
	c.stats.RecordLookup(stats.Lookup{
		Namespace: l.Namespace, Admit: l.Writer, Backend: l.Backend, Run: run, Key: l.Key, Name: l.Name,
		Hit: l.Hit, Partial: l.Partial, Bytes: l.Bytes, CompileSeconds: l.CompileSeconds, Waited: l.Waited,
		WaitSeconds: l.WaitSeconds,
	})
	if !l.Hit && l.Explanation != nil {
		c.stats.RecordMiss(stats.Miss{Namespace: l.Namespace, Backend: l.Backend, Key: l.Key.String(),
			DisplayName: l.Name, Run: run, Explanation: *l.Explanation})
	}
}

// Write counts an upload by result and, when it stored a new entry, in the
// statistics (which also index its components for explaining misses).
func (c *counter) Write(w Write) {
	c.puts.WithLabelValues(w.Result).Inc()
	if w.Result == WriteExists && c.touch != nil {
		c.touch(w.Namespace, w.Key)
	}
	if w.Result != WriteCreated {
		return
	}
	c.stats.RecordWrite(stats.Write{Namespace: w.Namespace, Backend: w.Backend, Run: w.Run, Key: w.Key,
		Name: w.Name, Bytes: w.Bytes, CompileSeconds: w.CompileSeconds, Components: w.Components})
}
