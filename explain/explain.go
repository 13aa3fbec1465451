// Package explain says why a lookup missed: it compares the components of the
// signature that missed (see keying) with those of the stored entries of the
// same namespace and backend, and names the components that differ.
//
// The comparison is pure and deterministic; Index keeps the components of
// the stored entries in memory (an inverted index, bounded: see IndexConfig)
// and finds the nearest among all of them, so that explaining a miss never
// walks the store and stays exact as the store grows.
package explain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// MaxShortValue is the longest component value shown verbatim in a Diff;
// longer values are shown as an abbreviated digest.
const MaxShortValue = 96

// Reason codes for a miss that has no differing components to name.
const (
	// ReasonNoEntries means the namespace holds no entry of this backend yet.
	ReasonNoEntries = "no_entries"
	// ReasonNoComponents means the signature carried no components to compare.
	ReasonNoComponents = "no_components"
	// ReasonIdentical meant an entry with identical components exists under
	// another key. Explain no longer produces it (such an entry says nothing
	// about the miss: see ReasonNotComparable); it is kept so that misses
	// recorded before still get a label.
	ReasonIdentical = "identical_components"
	// ReasonUnavailable means the server keeps no index to compare against
	// (it runs without statistics).
	ReasonUnavailable = "unavailable"
	// ReasonNotComparable means no stored entry can say why the key
	// differs: the backend's keys are opaque (the client computed its own
	// key, as with passthrough) or every stored entry has exactly the
	// signature's components. Such an explanation names no entry.
	ReasonNotComparable = "not_comparable"
)

// Diff is the wire type of the same name (wire).
type Diff = wire.Diff

// Candidate is a stored entry the miss is compared against.
type Candidate struct {
	Key        string            `json:"key"`
	Name       string            `json:"name,omitempty"`
	Created    time.Time         `json:"created"`
	Components map[string]string `json:"-"`
}

// Nearest is the wire type of the same name (wire).
type Nearest = wire.Nearest

// Explanation is the wire type of the same name (wire).
type Explanation = wire.Explanation

// MaxNearest bounds Explanation.Nearest.
const MaxNearest = 3

// labels names well-known components for humans. The keys are the component
// names the built-in plugins emit, and a few aliases.
var labels = map[string]string{
	"module":            "module",
	"module_digest":     "module",
	"jaxlib_version":    "jaxlib version",
	"jaxlib":            "jaxlib version",
	"jaxlib_build":      "jaxlib build",
	"jax_version":       "jax version",
	"platform":          "platform",
	"platform_version":  "platform version",
	"xla_flags":         "XLA flags",
	"flags":             "XLA flags",
	"compile_options":   "compile options",
	"topology":          "device topology",
	"compression":       "compression",
	"custom_hook":       "custom hook",
	"backend_version":   "backend version",
	"num_partitions":    "number of partitions",
	"num_replicas":      "number of replicas",
	"plugin":            "plugin version",
	"passthrough_key":   "client key",
	"device_assignment": "device assignment",
	// pt2 (torch.compile): the parts torch hashes into its keys.
	"cache":             "torch cache kind",
	"torch_version":     "torch version",
	"triton_version":    "Triton version",
	"device":            "device",
	"device_capability": "device capability",
	"inductor_config":   "Inductor config",
	"graph":             "FX graph",
	"other":             "other inputs torch hashes",
}

// Label returns the human name of a component ("xla_flags" → "XLA flags").
// Unknown names are returned with underscores replaced by spaces.
func Label(component string) string {
	if l, ok := labels[component]; ok {
		return l
	}
	return strings.ReplaceAll(component, "_", " ")
}

// ReasonLabel returns a human phrase for a Reason code, e.g. "XLA flags
// differ" or "jaxlib version, platform differ".
func ReasonLabel(reason string) string {
	switch reason {
	case ReasonNoEntries:
		return "no entry of this backend (or kind) in the namespace yet"
	case ReasonNoComponents:
		return "signature has no components to compare"
	case ReasonIdentical:
		return "an entry with identical components exists under another key"
	case ReasonUnavailable:
		return "not explained (statistics are off)"
	case ReasonNotComparable:
		return "nothing comparable (the components cannot tell why the key differs)"
	case "":
		return "unexplained"
	}
	parts := strings.Split(reason, "+")
	seen := map[string]bool{}
	var names []string
	for _, p := range parts {
		l := Label(p)
		if !seen[l] {
			seen[l] = true
			names = append(names, l)
		}
	}
	verb := "differs"
	if len(names) > 1 || strings.HasSuffix(names[0], "s") && !strings.HasSuffix(names[0], "ss") {
		verb = "differ"
	}
	return strings.Join(names, ", ") + " " + verb
}

// Compare returns the components that differ between want (the missed
// signature) and have (a stored entry), sorted by component name.
func Compare(want, have map[string]string) []Diff {
	var diffs []Diff
	for name, w := range want {
		h, ok := have[name]
		if ok && h == w {
			continue
		}
		diffs = append(diffs, makeDiff(name, w, h, !ok, false))
	}
	for name, h := range have {
		if _, ok := want[name]; !ok {
			diffs = append(diffs, makeDiff(name, "", h, false, true))
		}
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].Component < diffs[j].Component })
	return diffs
}

func makeDiff(name, want, have string, missing, extra bool) Diff {
	return makeDiffShown(name, want, shownOf(have), missing, extra)
}

// shown is a stored component value as a Diff shows it: the value when
// short, its abbreviated digest otherwise. The index keeps only this.
type shown struct {
	v     string
	short bool
}

func shownOf(v string) shown {
	if isShort(v) {
		return shown{v: v, short: true}
	}
	return shown{v: abbrev(v)}
}

// makeDiffShown is makeDiff with have as shown: a short have is the value
// itself, so abbreviating it when want is long gives what makeDiff would.
func makeDiffShown(name, want string, have shown, missing, extra bool) Diff {
	d := Diff{Component: name, Missing: missing, Extra: extra}
	if isShort(want) && have.short {
		d.Want, d.Have, d.Short = want, have.v, true
		return d
	}
	d.Want, d.Have = abbrev(want), have.v
	if have.short {
		d.Have = abbrev(have.v)
	}
	return d
}

// abbrev shortens a long value to a recognisable digest. A value that is
// already a hex digest keeps its own first 12 characters.
func abbrev(v string) string {
	if v == "" {
		return ""
	}
	if isTaggedDigest(v) && len(v) <= 32 {
		return v
	}
	if s, ok := strings.CutPrefix(v, "sha256:"); ok {
		v = s
	}
	if len(v) >= 12 && isHex(v) {
		return "sha256:" + v[:12] + "…"
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:6]) + "…"
}

// isShort reports whether v is shown verbatim: short, printable and not a
// digest.
func isShort(v string) bool {
	if len(v) > MaxShortValue || !printable(v) || isTaggedDigest(v) {
		return false
	}
	return len(v) < 32 || !isHex(v)
}

// isTaggedDigest reports whether v looks like "<algorithm>:<hex>", e.g.
// "sha256:…" or "xxh64:0123456789abcdef".
func isTaggedDigest(v string) bool {
	alg, h, ok := strings.Cut(v, ":")
	if !ok || alg == "" || len(alg) > 16 || len(h) < 8 || !isHex(h) {
		return false
	}
	for i := 0; i < len(alg); i++ {
		if c := alg[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// originComponents are components that say where a key came from but not
// which program it belongs to: the passthrough plugin emits only
// {"kind": "jax"} (or "pt2", "triton"), the same for every entry of that
// kind, because the client computed the key itself.
var originComponents = map[string]bool{"kind": true}

// opaque reports whether the components of a signature carry nothing that
// identifies the program (every one is an origin component): comparing them
// with stored entries can only name unrelated programs.
func opaque(components map[string]string) bool {
	for name := range components {
		if !originComponents[name] {
			return false
		}
	}
	return true
}

// Explain compares want with every candidate and returns the explanation
// built from the nearest ones: those differing in the fewest components,
// newest first among equals.
//
// It never points at an entry that is not comparable: a candidate with
// exactly want's components says nothing about why the key differs and is
// skipped, and when every candidate is like that, or want's components do
// not identify the program (passthrough's opaque keys), the reason is
// ReasonNotComparable with no Nearest.
func Explain(want map[string]string, candidates []Candidate) Explanation {
	// Only entries of want's kind are comparable (KindComponent).
	same := make([]Candidate, 0, len(candidates))
	for _, c := range candidates {
		if c.Components[KindComponent] == want[KindComponent] {
			same = append(same, c)
		}
	}
	if len(same) == 0 && len(candidates) > 0 && len(want) > 0 {
		return firstOfKind(want, len(candidates))
	}
	candidates = same
	if ex, ok := special(want, len(candidates)); ok {
		return ex
	}
	type scored struct {
		c     Candidate
		diffs []Diff
	}
	best := make([]scored, 0, MaxNearest+1)
	for _, c := range candidates {
		d := Compare(want, c.Components)
		if len(d) == 0 {
			continue
		}
		s := scored{c, d}
		i := sort.Search(len(best), func(i int) bool {
			if len(best[i].diffs) != len(d) {
				return len(best[i].diffs) > len(d)
			}
			return best[i].c.Created.Before(c.Created)
		})
		if i >= MaxNearest {
			continue
		}
		best = append(best, scored{})
		copy(best[i+1:], best[i:])
		best[i] = s
		if len(best) > MaxNearest {
			best = best[:MaxNearest]
		}
	}
	nearest := make([]Nearest, 0, len(best))
	for _, b := range best {
		nearest = append(nearest, Nearest{Key: b.c.Key, Name: b.c.Name, Created: b.c.Created, Diffs: b.diffs})
	}
	return explanation(len(candidates), nearest)
}

// special returns the explanation of a miss that needs no comparison: no
// components, no stored entries (n is how many there are), or opaque
// components. ok is false when want must be compared.
func special(want map[string]string, n int) (ex Explanation, ok bool) {
	switch {
	case len(want) == 0:
		return Explanation{Reason: ReasonNoComponents, Summary: "The signature has no components to compare, so the miss cannot be explained.", Compared: n}, true
	case n == 0:
		return Explanation{Reason: ReasonNoEntries, Summary: "No entry of this backend exists in the namespace yet: this is the first compile.", Compared: 0}, true
	case opaque(want):
		return Explanation{Reason: ReasonNotComparable, Compared: 0,
			Summary: "This backend's keys are opaque: the client computed its own key, and the signature's components only say where the key came from, so there is nothing to compare with stored entries."}, true
	}
	return Explanation{}, false
}

// firstOfKind explains a miss when the namespace holds others entries of
// the backend but none of want's kind: the first compile of its kind, not a
// difference from an entry of another kind.
func firstOfKind(want map[string]string, others int) Explanation {
	kind := want[KindComponent]
	what := "without a " + Label(KindComponent)
	if kind != "" {
		what = Label(KindComponent) + " " + quote(kind)
	}
	return Explanation{Reason: ReasonNoEntries, Compared: 0,
		Summary: fmt.Sprintf("No entry of this kind (%s) exists in the namespace yet, only %d of other kinds: this is the first compile of its kind.", what, others)}
}

// explanation builds the explanation from the nearest entries, closest
// first (each with at least one diff), after comparing with compared
// entries.
func explanation(compared int, nearest []Nearest) Explanation {
	if len(nearest) == 0 {
		return Explanation{Reason: ReasonNotComparable, Compared: compared,
			Summary: "Every stored entry of this backend compared has exactly this signature's components, so they cannot say why its key differs: the key covers inputs the components do not show (a torch C++ library's key is its sources and compile command; the FX graph miss before it says why), or a different plugin version produced the entries."}
	}
	ex := Explanation{Compared: compared, Nearest: nearest}
	top := nearest[0]
	ex.Reason = reasonOf(top.Diffs)
	var b strings.Builder
	b.WriteString(upperFirst(ReasonLabel(ex.Reason)))
	b.WriteString(" from the nearest entry")
	if top.Name != "" {
		b.WriteString(" (" + top.Name + ")")
	}
	b.WriteString(": ")
	for i, d := range top.Diffs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(d.Component + " ")
		switch {
		case d.Missing:
			b.WriteString(quote(d.Want) + " here, absent there")
		case d.Extra:
			b.WriteString("absent here, " + quote(d.Have) + " there")
		default:
			b.WriteString(quote(d.Want) + " here, " + quote(d.Have) + " there")
		}
	}
	b.WriteString(".")
	ex.Summary = b.String()
	return ex
}

// reasonAlias folds components derived from another into it for the
// reason: a different module also has a different module_bytes.
var reasonAlias = map[string]string{"module_bytes": "module"}

// reasonOf is the sorted, de-duplicated names of the differing components
// (after reasonAlias) joined by "+".
func reasonOf(diffs []Diff) string {
	seen := make(map[string]bool, len(diffs))
	names := make([]string, 0, len(diffs))
	for _, d := range diffs {
		n := d.Component
		if a, ok := reasonAlias[n]; ok {
			n = a
		}
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return strings.Join(names, "+")
}

// quote shows a component's value in a summary; an empty one (no XLA
// flags, no platform version) is "none", which reads better than "".
func quote(s string) string {
	if s == "" {
		return "none"
	}
	return "\"" + s + "\""
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	if s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}
