package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/fleet/registry"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/wire"
)

// fleetConfig keeps the wire.ReplicaConfig a fleet replica publishes in its
// heartbeat, so that `cachesvc fleet`-style views (stats --scope fleet, the
// dashboard) can warn when replicas on one bucket disagree. It is computed
// off the heartbeat's goroutine (the plugin list waits for the built-ins to
// compile) and again after every SIGHUP reload; until the first computation
// the heartbeat carries none.
type fleetConfig struct {
	host     *plugins.Host
	maxEntry int64
	nsPath   string
	tokens   *auth.Guard  // nil without --tokens
	signer   *auth.Signer // nil without --signing-key
	log      *slog.Logger
	cur      atomic.Pointer[wire.ReplicaConfig]
}

// get returns the config computed last, nil before the first.
func (f *fleetConfig) get() *wire.ReplicaConfig { return f.cur.Load() }

// refresh recomputes the config. A namespaces file that no longer parses
// keeps the digest of the one in force (a failed reload keeps the old
// quotas too); the tokens are those in force, which a SIGHUP reloads
// before it calls refresh (a failed reload keeps the old ones, and so
// their digest).
func (f *fleetConfig) refresh() {
	c := &wire.ReplicaConfig{MaxEntrySize: f.maxEntry, Tokens: "none", SigningKey: "none"}
	if f.tokens != nil {
		c.Tokens = f.tokens.Tokens().Digest()
	}
	if f.signer != nil {
		c.SigningKey = base64.StdEncoding.EncodeToString(f.signer.PublicKey())
	}
	for _, p := range f.host.Plugins() {
		c.Plugins = append(c.Plugins, fmt.Sprintf("%s sha256:%.12s", p.ID, p.SHA256))
	}
	if f.nsPath != "" {
		digest, err := namespacesDigest(f.nsPath)
		if prev := f.cur.Load(); err != nil && prev != nil {
			digest = prev.Namespaces
		} else if err != nil {
			f.log.Warn("fleet config: cannot digest the namespaces file", "file", f.nsPath, "err", err)
		}
		c.Namespaces = digest
	}
	f.cur.Store(c)
}

// descConfigInfo is cachesvc_fleet_config_info: the fleet view's warning
// that replicas disagree (a token rotation one replica missed, a half-rolled
// signing key) reached only those who ran `cachesvc stats --scope fleet` or
// opened the dashboard; as a metric an alert compares the replicas of a job.
var descConfigInfo = prometheus.NewDesc("cachesvc_fleet_config_info",
	"The settings every replica of a fleet must share, as this replica has them in force, one series per setting (max_entry_size, plugins, namespaces, tokens, signing_key), always 1: digests, never a token. Replicas with different values for a setting disagree (`cachesvc stats --scope fleet` names them). Absent until the plugins have loaded.",
	[]string{"setting", "value"}, nil)

// Describe sends cachesvc_fleet_config_info's descriptor.
func (f *fleetConfig) Describe(ch chan<- *prometheus.Desc) { ch <- descConfigInfo }

// Collect sends cachesvc_fleet_config_info for the config in force. The
// plugin list, a line per plugin, becomes its digest: a label value stays
// short, and two lists still compare equal exactly when their digests do.
func (f *fleetConfig) Collect(ch chan<- prometheus.Metric) {
	c := f.get()
	if c == nil {
		return
	}
	for _, v := range registry.ConfigValues(c) {
		value := v.Value
		if v.Setting == "plugins" {
			sum := sha256.Sum256([]byte(value))
			value = "sha256:" + hex.EncodeToString(sum[:6])
		}
		ch <- prometheus.MustNewConstMetric(descConfigInfo, prometheus.GaugeValue, 1, v.Setting, value)
	}
}

// namespacesDigest is "sha256:<12 hex>" of the parsed namespaces file: two
// files that differ only in formatting or key order agree.
func namespacesDigest(path string) (string, error) {
	q, err := loadNamespaces(path) // namespaces.go
	if err != nil {
		return "", err
	}
	js, err := json.Marshal(q)
	if err != nil {
		return "", fmt.Errorf("digest namespaces file %s: %w", path, err)
	}
	sum := sha256.Sum256(js)
	return "sha256:" + hex.EncodeToString(sum[:6]), nil
}
