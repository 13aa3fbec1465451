package wire

import "time"

// Diff is one component that differs between the missed signature and a
// stored entry. Want and Have are the values themselves when short, and an
// abbreviated digest ("sha256:0123456789ab…") otherwise; an empty Have with
// Missing set means the stored entry has no such component (and the reverse
// for Extra).
type Diff struct {
	Component string `json:"component"`
	Want      string `json:"want"`
	Have      string `json:"have"`
	// Short is true when Want and Have are the values, false when digests.
	Short bool `json:"short"`
	// Missing is true when the stored entry lacks the component.
	Missing bool `json:"missing,omitempty"`
	// Extra is true when the missed signature lacks the component.
	Extra bool `json:"extra,omitempty"`
}

// Nearest is one stored entry close to the missed signature and how it
// differs.
type Nearest struct {
	Key     string    `json:"key"`
	Name    string    `json:"name,omitempty"`
	Created time.Time `json:"created"`
	Diffs   []Diff    `json:"diffs"`
}

// Explanation is why a lookup missed.
type Explanation struct {
	// Reason is a stable code for grouping misses: the sorted names of the
	// components that differ from the nearest entry joined by "+" (for
	// example "xla_flags" or "jaxlib_version+platform"), or one of the
	// Reason* constants.
	Reason string `json:"reason"`
	// Summary is a human sentence, e.g. "XLA flags differ from the nearest
	// entry (jit_f, 3 candidates compared)".
	Summary string `json:"summary"`
	// Compared is how many stored entries were compared.
	Compared int `json:"compared"`
	// Nearest lists up to MaxNearest closest entries, closest first.
	Nearest []Nearest `json:"nearest,omitempty"`
}
