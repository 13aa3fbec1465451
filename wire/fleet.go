package wire

import "time"

// Replica states, as a replica reports itself in its heartbeat object.
const (
	// ReplicaServing is a replica that is up.
	ReplicaServing = "serving"
	// ReplicaStopping is a replica's last heartbeat, written at shutdown.
	ReplicaStopping = "stopping"
)

// Replica health, as derived by a reader from the heartbeat's age (the
// writer's clock: replicas are expected to run NTP).
const (
	// HealthOK is a heartbeat younger than three heartbeat intervals.
	HealthOK = "ok"
	// HealthStale is a heartbeat older than three intervals: the replica
	// is overloaded, partitioned from the bucket, or just died.
	HealthStale = "stale"
	// HealthGone is a heartbeat older than the gone age (an hour by
	// default); the next gc removes the replica's object.
	HealthGone = "gone"
	// HealthStopped is a replica that said it was stopping, and has not
	// come back (its object is removed like a gone one's).
	HealthStopped = "stopped"
)

// SharedTierState is one replica's view of the shared tier (S3).
type SharedTierState struct {
	// Configured is false for a replica with no shared tier.
	Configured bool `json:"configured"`
	// Reachable is false while the replica's last request to the shared
	// tier failed for want of the server.
	Reachable bool `json:"reachable"`
	// LastError is the last failure's message, empty when none.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// QueueDepth is the write-behind upload queue's length (0 in
	// write-through mode).
	QueueDepth int64 `json:"queue_depth"`
}

// ReplicaStatus is one replica as the fleet sees it: the content of its
// heartbeat object (<prefix>replicas/<id>.json) plus the health a reader
// derives from it.
type ReplicaStatus struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	// URL is the address the replica advertises (empty when unknown).
	URL       string    `json:"url,omitempty"`
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"`
	// State is ReplicaServing or ReplicaStopping.
	State string `json:"state"`
	// Interval is how often the replica heartbeats, in seconds: a reader
	// calls it stale after three intervals without one.
	Interval float64 `json:"interval_s"`
	// Health and HeartbeatAge are set by the reader (registry.List), not
	// stored.
	Health       string  `json:"health,omitempty"`
	HeartbeatAge float64 `json:"heartbeat_age_s,omitempty"`
	// Hot is the replica's hot tier (its Badger directory): Tier
	// StoreTierHot, and its namespaces' usage (trimmed first when the
	// heartbeat is too large). Replicas before stats format 4 left Tier
	// empty.
	Hot    StoreUsage      `json:"hot"`
	Shared SharedTierState `json:"shared"`
	// Totals repeats Stats.Totals, so that a listing without the
	// snapshots still shows each replica's numbers.
	Totals Totals `json:"totals"`
	// Stats is the replica's own statistics, bounded in size (top runs and
	// entries only). FleetStats leaves it out.
	Stats *Snapshot `json:"stats,omitempty"`
	// Config is what the replica must agree on with the rest of its fleet;
	// nil from a replica too old to say, or still loading its plugins.
	Config *ReplicaConfig `json:"config,omitempty"`
}

// ReplicaConfig is the part of a replica's configuration that every replica
// of a fleet must share: replicas that disagree give one signature
// different keys (plugins), accept an upload that another refuses
// (max_entry_size), bound namespaces differently (the namespaces file),
// refuse a token another accepts (tokens, as when one replica missed the
// SIGHUP of a rotation) or sign with a key clients do not verify
// (signing_key), silently. Each replica publishes it in its heartbeat; FleetStats names
// the settings on which they differ.
type ReplicaConfig struct {
	// MaxEntrySize is --max-entry-size in bytes.
	MaxEntrySize int64 `json:"max_entry_size"`
	// Plugins are the loaded plugins, built-ins included, as
	// "name@version sha256:<first 12 hex of the wasm>" (sorted): keys hash
	// name@version, and one name@version with other code keys differently.
	Plugins []string `json:"plugins"`
	// Namespaces is "sha256:<first 12 hex>" of the namespaces file in force
	// (its parsed quotas, so formatting does not count); "" without one.
	Namespaces string `json:"namespaces"`
	// Tokens is "sha256:<first 12 hex>" of the tokens in force (--tokens:
	// every rule's name, token hash and scopes, the anonymous rule's too,
	// so order and comments do not count), "none" without --tokens; ""
	// (absent) from a replica too old to say, which is not compared.
	Tokens string `json:"tokens,omitempty"`
	// SigningKey is the base64 Ed25519 public key that --signing-key's
	// signatures verify with (what clients set as CACHESVC_VERIFY_KEY),
	// "none" without --signing-key; "" (absent) from a replica too old to
	// say, which is not compared.
	SigningKey string `json:"signing_key,omitempty"`
}

// ConfigMismatch is one setting on which the live replicas of a fleet
// disagree, with the replicas holding each value.
type ConfigMismatch struct {
	// Setting is the ReplicaConfig field's JSON name: "max_entry_size",
	// "plugins", "namespaces", "tokens" or "signing_key".
	Setting string `json:"setting"`
	// Values lists each value with the replicas that hold it, most
	// replicas first.
	Values []ConfigValue `json:"values"`
}

// ConfigValue is one value of a ConfigMismatch's setting.
type ConfigValue struct {
	Value    string   `json:"value"`
	Replicas []string `json:"replicas"`
}

// FleetStats is the fleet part of GET /v1/stats?scope=fleet: every replica
// with its health, and the merged totals of all their snapshots.
type FleetStats struct {
	GeneratedAt time.Time `json:"generated_at"`
	// Replicas are sorted by ID, without their snapshots.
	Replicas []ReplicaStatus `json:"replicas"`
	// Healthy counts the replicas whose Health is HealthOK.
	Healthy int `json:"healthy"`
	// Totals merges the replicas' snapshots: per namespace × backend, runs
	// by name, top entries re-ranked. Top entries and runs are merged from
	// each replica's own top lists, so an entry that is just outside every
	// replica's list is missing from the fleet's.
	Totals Snapshot `json:"totals"`
	// ConfigMismatches lists the settings (ReplicaConfig) on which the
	// replicas that are ok or stale disagree; empty when they agree.
	ConfigMismatches []ConfigMismatch `json:"config_mismatches,omitempty"`
}
