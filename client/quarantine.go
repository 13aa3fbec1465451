package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// Report is one report that an entry failed to load.
type Report struct {
	Time     time.Time `json:"time"`
	Reason   string    `json:"reason"`
	Reporter string    `json:"reporter"`
}

// ReportState is an entry's reports and quarantine state, the answer of
// GET /v1/{ns}/entries/{key}/reports (and, without Recent and the
// quarantine details, of POST .../quarantine).
type ReportState struct {
	Namespace   string `json:"namespace"`
	Key         string `json:"key"`
	Reports     int64  `json:"reports"`
	Distinct    int    `json:"distinct_reporters"`
	Threshold   int    `json:"threshold"`
	Quarantined bool   `json:"quarantined"`
	// Recent are the last reports, oldest first.
	Recent        []Report   `json:"recent"`
	QuarantinedAt *time.Time `json:"quarantined_at"`
	// Cause is reports, admin or corrupt.
	Cause      string `json:"cause"`
	Reason     string `json:"reason"`
	Restorable bool   `json:"restorable"`
}

// QuarantinedEntry is one entry of GET /v1/{ns}/quarantine.
type QuarantinedEntry struct {
	EntryInfo
	QuarantinedAt time.Time `json:"quarantined_at"`
	Cause         string    `json:"cause"`
	Reason        string    `json:"reason"`
	Reports       int64     `json:"reports"`
	Restorable    bool      `json:"restorable"`
}

// Quarantine quarantines the entry (ns, key) now, with reason: it is no
// longer served, and can be restored. Already quarantined is no error.
func (c *Client) Quarantine(ctx context.Context, ns, key, reason string) (ReportState, error) {
	var st ReportState
	_, err := c.postJSON(ctx, c.url(ns, "entries", key, "quarantine"), map[string]string{"reason": reason}, &st, http.StatusOK)
	return st, err
}

// Restore serves a quarantined entry again and returns its metadata; an
// entry that is not quarantined is an *Error with Status 404.
func (c *Client) Restore(ctx context.Context, ns, key string) (EntryInfo, error) {
	var e EntryInfo
	req, err := c.newRequest(ctx, http.MethodPost, c.url(ns, "entries", key, "restore"), bytes.NewReader(nil))
	if err != nil {
		return e, err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return e, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		return e, fmt.Errorf("decode restore answer: %w", err)
	}
	return e, nil
}

// Reports returns the entry's reports and quarantine state.
func (c *Client) Reports(ctx context.Context, ns, key string) (ReportState, error) {
	var st ReportState
	err := c.getJSON(ctx, c.url(ns, "entries", key, "reports"), &st)
	return st, err
}

// ListQuarantined calls fn with every quarantined entry of ns, in key
// order, a page at a time, until the listing ends or fn returns an error.
func (c *Client) ListQuarantined(ctx context.Context, ns string, fn func(QuarantinedEntry) error) error {
	q := url.Values{}
	q.Set("limit", fmt.Sprint(wire.MaxListLimit))
	return eachPage(ctx, c, c.url(ns, "quarantine"), q, fn)
}

// Match reports whether e passes f at time now, as the server's filters
// decide (for listings the server does not filter, such as quarantine).
// Ages that do not parse match nothing.
func (f EntryFilter) Match(e EntryInfo, now time.Time) bool {
	older := func(age string, t time.Time) bool {
		if age == "" {
			return true
		}
		d, err := wire.ParseAge(age)
		return err == nil && t.Before(now.Add(-d))
	}
	switch {
	case f.Writer != "" && e.Writer != f.Writer,
		f.Run != "" && e.Run != f.Run,
		f.Backend != "" && e.Backend != f.Backend,
		!older(f.OlderThan, e.Created),
		!older(f.IdleFor, e.LastAccess),
		e.Size < f.MinSize,
		f.MaxSize > 0 && e.Size > f.MaxSize:
		return false
	}
	return true
}
