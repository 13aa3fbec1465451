package registry

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/cachesvc/cachesvc/wire"
)

// configSettings are the ReplicaConfig fields compared across a fleet, by
// their JSON names, in the order ConfigMismatches and ConfigValues give
// them; value is "" for a field the replica's version does not publish.
var configSettings = []struct {
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

// ConfigValue is one setting of a replica's config as ConfigMismatches
// compares it.
type ConfigValue struct {
	Setting, Value string
}

// ConfigValues returns c's settings as ConfigMismatches compares them
// (max_entry_size, plugins, namespaces, tokens, signing_key), leaving out
// those c's version does not publish, so that what a replica exports
// about itself and what the fleet view compares are one definition.
func ConfigValues(c *wire.ReplicaConfig) []ConfigValue {
	var out []ConfigValue
	for _, s := range configSettings {
		if v := s.value(c); v != "" {
			out = append(out, ConfigValue{Setting: s.name, Value: v})
		}
	}
	return out
}

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
	var out []wire.ConfigMismatch
	for _, s := range configSettings {
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
