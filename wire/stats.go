package wire

import "time"

// Totals is Counters as reported in JSON: with the hit rate and the compile
// seconds saved as a float.
type Totals struct {
	Lookups int64 `json:"lookups"`
	Hits    int64 `json:"hits"`
	Misses  int64 `json:"misses"`
	// WaitHits are the hits of GET ?wait=, which a client sends after its
	// own miss while another client holds the compile lease: Misses-WaitHits
	// is how many compiles clients ran.
	WaitHits int64 `json:"wait_hits"`
	// HitRate is Hits/Lookups, 0 when there were no lookups.
	HitRate             float64 `json:"hit_rate"`
	BytesIn             int64   `json:"bytes_in"`
	BytesOut            int64   `json:"bytes_out"`
	Writes              int64   `json:"writes"`
	Evictions           int64   `json:"evictions"`
	CompileSecondsSaved float64 `json:"compile_seconds_saved"`
	// EvictionsByReason splits the evictions counted with a reason
	// (absent when none was): Evictions also counts those recorded before
	// reasons were, so it may be larger than their sum.
	EvictionsByReason EvictionReasons `json:"evictions_by_reason,omitzero"`
}

// Eviction reasons: why the store removed an entry on its own.
const (
	// ReasonSize is an eviction to make room under the store's --max-size.
	ReasonSize = "size"
	// ReasonQuota is an eviction to make room under a namespace's max_bytes
	// or max_entries.
	ReasonQuota = "quota"
	// ReasonIdle is an expiry under a namespace's max_idle.
	ReasonIdle = "idle"
	// ReasonAge is an expiry under a namespace's max_age.
	ReasonAge = "age"
)

// EvictionReasons counts evictions by reason: size and quota are evictions
// to make room, idle and age are expirations.
type EvictionReasons struct {
	Size  int64 `json:"size,omitempty"`
	Quota int64 `json:"quota,omitempty"`
	Idle  int64 `json:"idle,omitempty"`
	Age   int64 `json:"age,omitempty"`
}

// Of returns the count of reason (ReasonSize...); nil for a reason it does
// not know.
func (e *EvictionReasons) Of(reason string) *int64 {
	switch reason {
	case ReasonSize:
		return &e.Size
	case ReasonQuota:
		return &e.Quota
	case ReasonIdle:
		return &e.Idle
	case ReasonAge:
		return &e.Age
	}
	return nil
}

// Evictions is how many entries were evicted to make room (size, quota).
func (e EvictionReasons) Evictions() int64 { return e.Size + e.Quota }

// Expirations is how many entries expired (idle, age).
func (e EvictionReasons) Expirations() int64 { return e.Idle + e.Age }

// BackendTotals are the totals of one backend.
type BackendTotals struct {
	Backend string `json:"backend"`
	Totals
}

// NamespaceTotals are the totals of one namespace, overall and per backend.
type NamespaceTotals struct {
	Namespace string `json:"namespace"`
	Totals
	Backends []BackendTotals `json:"backends"`
}

// RunTotals is one run's row in the runs table.
type RunTotals struct {
	Run        string    `json:"run"`
	Namespaces []string  `json:"namespaces"`
	FirstSeen  time.Time `json:"first_seen"`
	LastSeen   time.Time `json:"last_seen"`
	// FirstHit is when the run's first hit was counted (absent before
	// one): FirstHit-FirstSeen is its time to first hit.
	FirstHit time.Time `json:"first_hit,omitzero"`
	Totals
}

// TopEntry is one entry in "top entries by time saved".
type TopEntry struct {
	Namespace      string    `json:"namespace"`
	Key            string    `json:"key"`
	Name           string    `json:"name,omitempty"`
	Backend        string    `json:"backend"`
	CompileSeconds float64   `json:"compile_seconds"`
	Hits           int64     `json:"hits"`
	SecondsSaved   float64   `json:"seconds_saved"`
	LastHit        time.Time `json:"last_hit"`
}

// Snapshot is everything GET /v1/stats reports that stats knows.
type Snapshot struct {
	GeneratedAt time.Time         `json:"generated_at"`
	Totals      Totals            `json:"totals"`
	Namespaces  []NamespaceTotals `json:"namespaces"`
	Backends    []BackendTotals   `json:"backends"`
	Runs        []RunTotals       `json:"runs"`
	TopEntries  []TopEntry        `json:"top_entries"`
	MissReasons []ReasonCount     `json:"miss_reasons"`
	// Store holds the store-wide evictions and integrity failures counted
	// since the stats began, and the last sampled sizes.
	StoreCounters Global `json:"store_counters"`
}

// Points are one series' values, one per time in Series.Time. HitRate is
// null where there were no lookups.
type Points struct {
	Lookups      []int64    `json:"lookups"`
	Hits         []int64    `json:"hits"`
	Misses       []int64    `json:"misses"`
	HitRate      []*float64 `json:"hit_rate"`
	BytesIn      []int64    `json:"bytes_in"`
	BytesOut     []int64    `json:"bytes_out"`
	Writes       []int64    `json:"writes"`
	Evictions    []int64    `json:"evictions"`
	SecondsSaved []float64  `json:"seconds_saved"`
}

// Series are time series in columns, ready for a chart: Time holds the
// start of each step in Unix seconds.
type Series struct {
	Namespace  string            `json:"namespace,omitempty"`
	Since      time.Time         `json:"since"`
	Until      time.Time         `json:"until"`
	Step       int64             `json:"step_seconds"`
	Resolution string            `json:"resolution"`
	Time       []int64           `json:"t"`
	Total      Points            `json:"total"`
	Namespaces map[string]Points `json:"namespaces,omitempty"`
	Backends   map[string]Points `json:"backends"`
	// StoreBytes is the last sampled store size in each step (in a
	// namespace's series, that namespace's stored bytes), null for a step
	// without a sample: the server was not running, or the step is before
	// the first sample in the range. 0 is an empty store. (Servers before
	// Sampled sent 0 for no sample; a decoder into []int64 still reads 0.)
	// Evictions and IntegrityFailures are store-wide.
	StoreBytes        []*int64 `json:"store_bytes"`
	StoreEvictions    []int64  `json:"store_evictions"`
	IntegrityFailures []int64  `json:"integrity_failures"`
	// Sampled says for each step whether the server was recording: false
	// where it was not running (no sample, so its counts, here and in the
	// Points, are unknown rather than zero). Steps before the server
	// recorded a sample every minute it ran (older builds recorded one
	// only when a figure changed) cannot tell, and are true. Absent from
	// older servers.
	Sampled []bool `json:"sampled,omitempty"`
}

// Global are store-wide counters sampled from Config.Usage: evictions and
// integrity failures are additive, the sizes are the last sample.
type Global struct {
	Evictions         int64 `json:"evictions"`
	IntegrityFailures int64 `json:"integrity_failures"`
	StoreBytes        int64 `json:"store_bytes"`
	StoreEntries      int64 `json:"store_entries"`
	MaxBytes          int64 `json:"max_bytes"`
	// NamespaceBytes is each namespace's stored bytes at the sample, by
	// its stats label (namespaces past the label bound summed under
	// _other). Only the per-step records of the store series carry it, so
	// that a namespace's view charts its own size, not the server's.
	NamespaceBytes map[string]int64 `json:"namespace_bytes,omitempty"`
	// Uncounted marks a per-step record whose samples all had no count of
	// the sizes: the shared tier's bucket was not listed yet
	// (StoreUsage.Uncounted). Such a step has a null size in the store
	// series, and is still sampled. In Snapshot.StoreCounters it says the
	// last sample had no count: the sizes are the last counted sample's
	// (0 if none).
	Uncounted bool `json:"uncounted,omitempty"`
	// Sampled marks a per-step record written by a build that records a
	// sample every minute the server runs, not only when a figure changed:
	// from the first such record on, a step without a record had no sample.
	Sampled bool `json:"sampled,omitempty"`
}

// Miss is one explained lookup miss.
type Miss struct {
	Time        time.Time   `json:"time"`
	Namespace   string      `json:"namespace"`
	Backend     string      `json:"backend"`
	Key         string      `json:"key"`
	DisplayName string      `json:"display_name,omitempty"`
	Run         string      `json:"run,omitempty"`
	Explanation Explanation `json:"explanation"`
}

// ReasonCount is how many misses had one reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	// Label is the human phrase, e.g. "XLA flags differ".
	Label string `json:"label"`
	Count int64  `json:"count"`
}

// MissReport is the recent misses of a namespace and their counts by reason.
type MissReport struct {
	Namespace string        `json:"namespace"`
	Total     int64         `json:"total"`
	ByReason  []ReasonCount `json:"by_reason"`
	Recent    []Miss        `json:"recent"`
}
