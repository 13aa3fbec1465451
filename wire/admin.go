package wire

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PAX records that an export stream adds to the batch stream's records
// (PAXSHA256, PAXCompileSeconds, PAXName, PAXBackend, PAXSignature), so
// that an import keeps every piece of an entry's provenance. Times are RFC
// 3339 with nanoseconds in UTC; labels and components are JSON objects.
const (
	PAXWriter     = "CACHESVC.writer"
	PAXRun        = "CACHESVC.run"
	PAXCreated    = "CACHESVC.created"
	PAXLastAccess = "CACHESVC.last_access"
	PAXHits       = "CACHESVC.hits"
	PAXLabels     = "CACHESVC.labels"
	PAXComponents = "CACHESVC.components"
	// ExportMember is the name of the last member of every complete export
	// stream (ExportSummary): a tar without it was cut short.
	ExportMember = "export.json"
)

// MaxListLimit is the most entries one page of GET /v1/{ns}/entries
// returns (the default, too).
const MaxListLimit = 1000

// EntryInfo is one entry's metadata and provenance, as the admin listing
// (GET /v1/{ns}/entries) and GET /v1/{ns}/entries/{key}/meta return it.
type EntryInfo struct {
	Namespace      string            `json:"namespace"`
	Key            string            `json:"key"`
	Size           int64             `json:"size"`
	SHA256         string            `json:"sha256"`
	Created        time.Time         `json:"created"`
	LastAccess     time.Time         `json:"last_access"`
	Hits           int64             `json:"hits"`
	Backend        string            `json:"backend,omitempty"`
	Name           string            `json:"name,omitempty"`
	CompileSeconds float64           `json:"compile_seconds,omitempty"`
	Writer         string            `json:"writer,omitempty"`
	Run            string            `json:"run,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Components     map[string]string `json:"components,omitempty"`
	// Signature is the entry's X-Cachesvc-Signature; only on the meta
	// route of a server with a signing key.
	Signature string `json:"signature,omitempty"`
}

// EntryList is one page of the admin listing. Next, when not empty, is the
// after= cursor of the next page; an empty Next means the listing is done.
type EntryList struct {
	Entries []EntryInfo `json:"entries"`
	Next    string      `json:"next,omitempty"`
}

// ExportSummary is the body of an export stream's last member
// (ExportMember).
type ExportSummary struct {
	Namespace string `json:"namespace"`
	// Entries and Bytes count the entry members before this one.
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
	// Vanished counts entries listed but deleted or evicted before their
	// bytes were read; they are not in the stream.
	Vanished int `json:"vanished"`
}

// MaxImportFailures bounds the failures an ImportResult lists; Failed
// counts them all.
const MaxImportFailures = 100

// ImportResult is the body of POST /v1/{ns}/import.
type ImportResult struct {
	Namespace string `json:"namespace"`
	// Imported entries were stored; Skipped ones were already present with
	// identical bytes; Failed ones were refused (listed in Failures, up to
	// MaxImportFailures).
	Imported int             `json:"imported"`
	Skipped  int             `json:"skipped"`
	Failed   int             `json:"failed"`
	Bytes    int64           `json:"bytes"`
	Failures []ImportFailure `json:"failures"`
	// Complete is true when the stream ended with its ExportMember: a
	// stream without it was cut short before the exporter finished.
	Complete bool `json:"complete"`
}

// ImportFailure is one member an import refused.
type ImportFailure struct {
	// Member is the tar member's name (the key, for an entry member).
	Member  string `json:"member"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ParseAge parses an age filter (older_than=, idle_for=): a Go duration
// ("36h", "90m") or a whole number of days ("30d"), positive.
func ParseAge(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" && strings.Trim(days, "0123456789") == "" {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 100*365 {
			return 0, fmt.Errorf("age %s must be 1d to 36500d", Echo(s))
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("age %s must be a positive duration such as 36h, 90m or 30d", Echo(s))
	}
	return d, nil
}
