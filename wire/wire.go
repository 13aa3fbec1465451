// Package wire holds the v1 API's wire format: header names, JSON request
// and response bodies, and the batch stream's PAX record names.
//
// The server (api), the Go client (client), `cachesvc stats`
// (stats/report) and the packages that produce the bodies (stats, explain,
// manifest) share these types, so that a field cannot be spelled two ways.
// It imports only the standard library.
package wire

import "time"

// Request and response headers of the entries API.
const (
	// HeaderContentSHA256 is the body's SHA-256 in hex: verified on PUT,
	// sent on GET, HEAD and PUT responses.
	HeaderContentSHA256 = "X-Content-SHA256"
	// HeaderCompileSeconds is how long the entry took to compile.
	HeaderCompileSeconds = "X-Compile-Seconds"
	// HeaderBackend names the compiler backend (xla, passthrough, …).
	HeaderBackend = "X-Cachesvc-Backend"
	// HeaderName is the entry's display name (jit_step, …).
	HeaderName = "X-Cachesvc-Name"
	// HeaderRun tags a request with the run it belongs to (run manifests),
	// and names the run that wrote an entry on responses.
	HeaderRun = "X-Cachesvc-Run"
	// HeaderSignatureSHA256, on POST /v1/{ns}/keys and /lookup, is the
	// SHA-256 (hex) of the signature's exact bytes as sent, before any
	// Content-Encoding: alone (an empty body) it asks the server to answer
	// from its memo (428 signature_required when it does not know it);
	// beside a body it is checked against it (400 on a mismatch).
	HeaderSignatureSHA256 = "X-Cachesvc-Signature-Sha256"
	// HeaderKey carries the computed key on a lookup response.
	HeaderKey = "X-Cachesvc-Key"
	// HeaderWriter names the token (or, without authentication, the client
	// address) that stored the entry.
	HeaderWriter = "X-Cachesvc-Writer"
	// HeaderCreated is when the entry was stored, RFC 3339 in UTC.
	HeaderCreated = "X-Cachesvc-Created"
	// HeaderSignature, present when the server has a signing key, is the
	// base64 Ed25519 signature of key ‖ sha256 (32 raw bytes each).
	HeaderSignature = "X-Cachesvc-Signature"
	// HeaderError carries an error answer's code (e.g. "not_found") on a
	// HEAD, whose answer has no body to carry it.
	HeaderError = "X-Cachesvc-Error"
	// HeaderRequestID names one request for support: a client may send
	// one (at most MaxRequestIDLen characters of A-Z a-z 0-9 . _ : -);
	// the server answers with it, or with one it made, on every response,
	// logs it as request_id and puts it in every error body.
	HeaderRequestID = "X-Request-Id"
)

// MaxRequestIDLen is the longest X-Request-Id the server takes from a
// client; a longer one is replaced by one the server makes.
const MaxRequestIDLen = 128

// ValidRequestID reports whether a client's X-Request-Id can be taken as
// is: 1 to MaxRequestIDLen characters of A-Z a-z 0-9 . _ : -. Anything
// else (a newline, quotes, a megabyte) would make log lines and headers
// unsafe to echo, so a server replaces it, never echoes it.
func ValidRequestID[T ~string | ~[]byte](v T) bool {
	if len(v) == 0 || len(v) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		switch b := v[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '.', b == '_', b == ':', b == '-':
		default:
			return false
		}
	}
	return true
}

// PAX records on every entry member of a batch stream, and the name of the
// stream's last member.
const (
	PAXSHA256         = "CACHESVC.sha256"
	PAXCompileSeconds = "CACHESVC.compile_seconds"
	PAXName           = "CACHESVC.name"
	PAXBackend        = "CACHESVC.backend"
	// PAXSignature is the entry's X-Cachesvc-Signature, when the server
	// signs entries.
	PAXSignature = "CACHESVC.signature"
	// MissingMember is the name of the last member of every complete batch
	// stream: {"missing": [...]}.
	MissingMember = "missing.json"
)

// MaxBatchKeys is the most keys one batch or exists request may name.
const MaxBatchKeys = 10_000

// ErrorBody is the JSON shape of every error response.
type ErrorBody struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject is an error's machine-readable code, human message and
// optional details.
type ErrorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
	// RequestID is the request's X-Request-Id, for a report to the
	// operator, who finds the request's log line by it.
	RequestID string `json:"request_id,omitempty"`
}

// QuotaDetails are the details of a 507 quota_exceeded error: which
// namespace's quota refused the upload, and by how much.
type QuotaDetails struct {
	Namespace string `json:"namespace"`
	// Limit is the quota's field that refused it: max_bytes or max_entries.
	Limit string `json:"limit"`
	// Quota is that field's value, in bytes or entries.
	Quota int64 `json:"quota"`
	// Need is what the upload needed: its bytes, or 1 entry.
	Need int64 `json:"need"`
	// InFlight is what other uploads in flight into the namespace hold;
	// when it is not 0, retrying after Retry-After may succeed.
	InFlight int64 `json:"in_flight"`
}

// LeaseEndDetails are the details of a GET ?wait= 404 not_found that
// ended because the entry's compile lease ended without the entry. How it
// ended tells a waiter what to do: a holder that released it gave up (its
// compiler wrote nothing: compile now), while one whose lease expired
// stopped renewing it (killed, or cut off from the server), so a waiter
// should take the lease over (POST it) rather than compile at once: one
// waiter then compiles and the others go on waiting for its entry.
type LeaseEndDetails struct {
	// Lease is how the lease ended: LeaseReleased or LeaseExpired.
	Lease string `json:"lease"`
	// Holder is the holder whose lease ended.
	Holder string `json:"holder"`
}

// How a compile lease ended, in LeaseEndDetails.
const (
	LeaseReleased = "released"
	LeaseExpired  = "expired"
)

// PutResponse is the JSON body of a successful PUT of an entry.
type PutResponse struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	// Created is true when this request stored the entry, false when an
	// identical entry already existed.
	Created bool `json:"created"`
}

// KeyResponse is the JSON body of POST /v1/{ns}/keys.
type KeyResponse struct {
	Key         string            `json:"key"`
	Backend     string            `json:"backend"`
	Plugin      string            `json:"plugin"`
	DisplayName string            `json:"display_name"`
	Components  map[string]string `json:"components"`
}

// LookupMiss is the JSON body of a 404 from POST /v1/{ns}/lookup: the usual
// error object plus the key and what explains the miss.
type LookupMiss struct {
	Error       ErrorObject       `json:"error"`
	Key         string            `json:"key"`
	Backend     string            `json:"backend"`
	Plugin      string            `json:"plugin"`
	DisplayName string            `json:"display_name"`
	Components  map[string]string `json:"components"`
	Explanation Explanation       `json:"explanation"`
}

// KeysRequest is the body of batch and exists requests.
type KeysRequest struct {
	Keys []string `json:"keys"`
}

// ExistsResponse is the body of POST /v1/{ns}/exists.
type ExistsResponse struct {
	Present []string `json:"present"`
	Missing []string `json:"missing"`
}

// MissingList is the content of a batch stream's missing.json member.
type MissingList struct {
	Missing []string `json:"missing"`
}

// LeaseRequest is the body of POST /v1/{ns}/leases/{key}; TTL nil means
// the server's default.
type LeaseRequest struct {
	Holder string   `json:"holder"`
	TTL    *float64 `json:"ttl_s"`
}

// LeaseResponse is the JSON body of 201 and 409 answers to a lease request
// (409 adds an "error" object).
type LeaseResponse struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
	// TTL is the seconds the lease was granted for, in agreement with
	// Expires: the ttl_s asked for, or what is left of the lease when a
	// renewal asked for less and kept its later expiry. (Servers before
	// this rule echoed the ttl_s asked for.)
	TTL float64 `json:"ttl_s,omitempty"`
	// Renewed is true on a 201 to a holder that already held the live
	// lease: the post extended it. A caller that did not take the lease
	// itself (another thread of the process named by the holder) should
	// wait for the entry rather than compile it again. Older servers omit it.
	Renewed bool `json:"renewed,omitempty"`
}

// KeyRecord is one key of a run manifest.
type KeyRecord struct {
	Key      string `json:"key"`
	Name     string `json:"name,omitempty"`
	LookedUp bool   `json:"looked_up"`
	Written  bool   `json:"written"`
}

// Manifest is what a run used, in first-use order: the body of GET
// /v1/{ns}/runs/{run}/manifest.
type Manifest struct {
	Run       string      `json:"run"`
	Namespace string      `json:"namespace"`
	Created   time.Time   `json:"created"`
	Updated   time.Time   `json:"updated"`
	Keys      []KeyRecord `json:"keys"`
	// Truncated is true when keys were dropped because of a bound.
	Truncated bool `json:"truncated"`
}

// StatsServer describes the serving process in GET /v1/stats.
type StatsServer struct {
	Version string `json:"version"`
}

// LeaseCounts are the compile leases in flight.
type LeaseCounts struct {
	Held    int64 `json:"held"`
	Waiting int64 `json:"waiting"`
}

// Values of StoreUsage.Tier.
const (
	// StoreTierLocal: the server's own store, all it serves (no shared
	// tier).
	StoreTierLocal = "local"
	// StoreTierShared: a fleet's shared tier (S3), which holds every
	// entry and has no size limit (cachesvc gc prunes it).
	StoreTierShared = "shared"
	// StoreTierHot: one replica's hot tier (Badger), bounded by its
	// --max-size.
	StoreTierHot = "hot"
)

// StoreUsage is the store's size and counters.
type StoreUsage struct {
	// Tier names whose entries, blobs and bytes these are: StoreTierLocal,
	// StoreTierShared (a fleet replica's answer; Hot then holds the
	// replica's hot tier) or StoreTierHot. Absent from servers before
	// stats format 3, whose fleet replicas reported the shared tier's
	// entries and bytes with the hot tier's max_bytes.
	Tier     string `json:"tier,omitempty"`
	Entries  int64  `json:"entries"`
	Blobs    int64  `json:"blobs"`
	Bytes    int64  `json:"bytes"`     // logical bytes of unique blobs
	MaxBytes int64  `json:"max_bytes"` // 0 means unlimited (always, for the shared tier)
	// DiskBytes is the disk space the store's files occupy (allocated
	// blocks, as du counts them, Badger's fixed files included); it runs
	// ahead of Bytes by what value-log GC has not reclaimed yet.
	DiskBytes         int64 `json:"disk_bytes"`
	Evictions         int64 `json:"evictions"`
	IntegrityFailures int64 `json:"integrity_failures"`
	// Quarantined counts the entries held in quarantine now (reported as
	// unloadable, or quarantined by an admin): never served, restorable.
	Quarantined int64 `json:"quarantined"`
	// QuarantinesReported and QuarantinesAdmin count quarantines since the
	// store opened by cause: reports from enough distinct clients, or an
	// admin (a report from an admin token or POST .../quarantine).
	// Quarantines of corrupt chunks are IntegrityFailures.
	QuarantinesReported int64 `json:"quarantines_reported"`
	QuarantinesAdmin    int64 `json:"quarantines_admin"`
	// Uncounted, when set, says that Entries, Blobs and Bytes are no count
	// of the shared tier: its bucket has not been listed yet (a replica
	// lists it at start and every ListInterval), so they hold only this
	// replica's own writes since it started, not 0 entries in the bucket.
	// Its value says why, for people: "first listing of the bucket
	// pending" (running or about to) or "first listing of the bucket
	// failing: <error>". Absent once a listing has finished, and on a store
	// that is counted as it changes (local, hot). Servers before the field
	// sent the partial counts alone.
	Uncounted string `json:"uncounted,omitempty"`
	// ListedAt is when the last listing of the shared tier's bucket
	// finished: Entries, Blobs and Bytes are its counts plus this
	// replica's writes since. Absent until the first listing, and on a
	// store without a shared tier.
	ListedAt time.Time `json:"listed_at,omitzero"`
	// ListInterval is how often, in seconds, this replica lists the shared
	// tier's bucket (s3.Config.UsageInterval), for the stats to say how
	// far behind the other replicas' writes the count may be. Absent on a
	// store without a shared tier, where listing is off, and from servers
	// before the field.
	ListInterval float64 `json:"list_interval_s,omitempty"`
	// Hot is this replica's hot tier when Tier is StoreTierShared: its
	// entries, bytes against its own --max-size, disk use and evictions
	// (Tier StoreTierHot). From stats format 4 on, a stats answer puts the
	// hot tier's namespaces here too, and its outer DiskBytes, Evictions
	// and Namespaces are the shared tier's: 0, 0 and none (the shared tier
	// has no disk of this replica's, evicts nothing, and quotas bound each
	// hot tier). Format 3 answers, and a tiered store's Usage inside the
	// process (what the metrics and the statistics' samples read), carry
	// the hot tier's DiskBytes, Evictions and Namespaces as the outer ones.
	Hot *StoreUsage `json:"hot,omitempty"`
	// Namespaces is each namespace's usage against its quota: every
	// namespace with entries or a quota on GET /v1/stats (up to 256, then an
	// "_other" row summing the rest), just the one asked for on GET
	// /v1/{ns}/stats; absent on a store that keeps none.
	Namespaces []NamespaceUsage `json:"namespaces,omitempty"`
}

// NamespaceUsage is one namespace's share of the hot store and the quota
// it is held to. A blob shared by two namespaces counts in the Bytes of
// each (a quota bounds what a namespace holds, not what it alone pays for).
// A zero maximum means no quota of that kind.
type NamespaceUsage struct {
	Namespace  string `json:"namespace"`
	Entries    int64  `json:"entries"`
	Bytes      int64  `json:"bytes"`
	MaxBytes   int64  `json:"max_bytes"`
	MaxEntries int64  `json:"max_entries"`
	// MaxIdleSeconds evicts an entry not read or written for this long.
	MaxIdleSeconds float64 `json:"max_idle_s,omitempty"`
	// MaxAgeSeconds evicts an entry this long after it was stored.
	MaxAgeSeconds float64 `json:"max_age_s,omitempty"`
	// Evictions counts entries removed to make room (the global size
	// bound or the namespace's quota): a store counts them since it
	// opened, the API reports the count persisted with the statistics,
	// which a restart does not reset, and adds those (expirations too) a
	// build from before 2026-12-03 persisted without a cause.
	Evictions int64 `json:"evictions"`
	// Expirations counts entries removed by max_idle or max_age, counted
	// and reported as Evictions is.
	Expirations int64 `json:"expirations"`
	// EvictionsByReason splits Evictions and Expirations by cause: size
	// (the store's --max-size), quota (max_bytes or max_entries), idle
	// (max_idle) and age (max_age); a cause that never happened is absent.
	EvictionsByReason map[string]int64 `json:"evictions_by_reason,omitempty"`
}

// StatsFormat is the format version of GET /v1/stats answers this build
// writes and fully reads. 1 (written as 0: no field) is every answer before
// the field; 2 adds format and store_scope, and a namespace's answer holds
// that namespace's store usage only; 3 adds store.tier and store.hot, and
// a fleet replica's store.max_bytes is 0 (the shared tier's, whose bytes
// store.bytes counts) where format 2 gave the hot tier's limit; 4 moves a
// fleet replica's hot-tier disk_bytes, evictions and namespaces from the
// outer store to store.hot (the outer ones are the shared tier's: 0, 0,
// none), so that the top level is all the fleet's. Raise it when a field
// changes meaning or unit (never reuse a name for another meaning); adding
// a field that old readers may ignore does not need it.
const StatsFormat = 4

// Values of StatsResponse.StoreScope.
const (
	StoreScopeServer    = "server"
	StoreScopeNamespace = "namespace"
)

// StatsResponse is the JSON body of GET /v1/stats and GET /v1/{ns}/stats:
// the persisted statistics (Snapshot: one set of totals, per namespace,
// backend and run, top entries, misses by reason), the store's usage, the
// leases in flight, the most recent misses and, when asked for with
// ?since=, time series.
type StatsResponse struct {
	// Format is the answer's format version (StatsFormat when written by
	// this build); servers older than the field omit it (0). A reader
	// that finds a larger one knows the server may send figures it does
	// not know or has changed the meaning of: it should say so, not guess.
	Format int `json:"format,omitempty"`
	// StoreScope says whose usage Store is: StoreScopeServer (the whole
	// store, GET /v1/stats) or StoreScopeNamespace (only the namespace's,
	// GET /v1/{ns}/stats). Absent from older servers, whose namespace
	// answers carried the whole store until format 2.
	StoreScope string `json:"store_scope,omitempty"`
	Snapshot
	Server       StatsServer `json:"server"`
	Store        StoreUsage  `json:"store"`
	Leases       LeaseCounts `json:"leases"`
	RecentMisses []Miss      `json:"recent_misses"`
	Series       *Series     `json:"series,omitempty"`
	// SharedTier is this replica's view of the fleet's shared tier; absent
	// on a server without one.
	SharedTier *SharedTierState `json:"shared_tier,omitempty"`
	// Fleet is every replica's health and the fleet's merged totals, with
	// ?scope=fleet on GET /v1/stats.
	Fleet *FleetStats `json:"fleet,omitempty"`
}
