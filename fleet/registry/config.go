package registry

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/cachesvc/cachesvc/wire"
)

// ConfigMismatches compares the configs (wire.ReplicaConfig) of the
// replicas that are ok or stale and returns the settings on which they
// disagree, each with the replicas per value (most replicas first, then by
// value), in the order max_entry_size, plugins, namespaces, tokens,
// signing_key. Replicas that are gone or stopped do not count: their
// settings no longer serve. A replica that publishes no config (an older
// version, or one still loading its plugins) is left out rather than
// reported, and so is one that publishes no tokens or signing key (a
// version from before they were published) for that setting: a rolling
// upgrade does not warn.
func ConfigMismatches(replicas []wire.ReplicaStatus) []wire.ConfigMismatch {
	settings := []struct {
		name  string
		value func(*wire.ReplicaConfig) string
	}{
		{"max_entry_size", func(c *wire.ReplicaConfig) string { return strconv.FormatInt(c.MaxEntrySize, 10) }},
		{"plugins", func(c *wire.ReplicaConfig) string { return strings.Join(c.Plugins, ", ") }},
		{"namespaces", func(c *wire.ReplicaConfig) string {
			if c.Namespaces == "" {
				return "none"
			}
			return c.Namespaces
		}},
		{"tokens", func(c *wire.ReplicaConfig) string { return c.Tokens }},
		{"signing_key", func(c *wire.ReplicaConfig) string { return c.SigningKey }},
	}
	var out []wire.ConfigMismatch
	for _, s := range settings {
		by := map[string][]string{}
		for _, r := range replicas {
			if r.Config == nil || (r.Health != wire.HealthOK && r.Health != wire.HealthStale) {
				continue
			}
			v := s.value(r.Config)
			if v == "" {
				continue // not published by this replica's version
			}
			by[v] = append(by[v], r.ID)
		}
		if len(by) < 2 {
			continue
		}
		m := wire.ConfigMismatch{Setting: s.name}
		for v, ids := range by {
			slices.Sort(ids)
			m.Values = append(m.Values, wire.ConfigValue{Value: v, Replicas: ids})
		}
		slices.SortFunc(m.Values, func(a, b wire.ConfigValue) int {
			return cmp.Or(cmp.Compare(len(b.Replicas), len(a.Replicas)), cmp.Compare(a.Value, b.Value))
		})
		out = append(out, m)
	}
	return out
}
