package api

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store"
)

// Quarantiner is what the report and quarantine routes need of the store:
// *store.Badger and the tiered store implement it. See store.Badger's
// methods of the same names for the contracts.
type Quarantiner interface {
	Report(ctx context.Context, ns string, key cachekey.Key, r store.Report, threshold int, admin bool) (store.ReportState, error)
	Reports(ctx context.Context, ns string, key cachekey.Key) (store.ReportState, error)
	Quarantine(ctx context.Context, ns string, key cachekey.Key, reason string) (store.ReportState, error)
	Restore(ctx context.Context, ns string, key cachekey.Key) (store.Meta, error)
	WalkQuarantined(ctx context.Context, ns string, after *cachekey.Key, fn func(store.Quarantined) bool) error
}

// DefaultQuarantineAfter is the default Config.QuarantineAfter.
const DefaultQuarantineAfter = 2

// MaxClientIDLen bounds a report's "client" field.
const MaxClientIDLen = 128

// quarantineAPI serves reports of entries that failed to load and the
// quarantine they lead to.
type quarantineAPI struct {
	q         Quarantiner // nil: the store cannot quarantine (501)
	threshold int
	body      bodies
	auth      *auth.Guard
	reports   *prometheus.CounterVec
	stats     *stats.Stats // a restored entry explains misses again
	log       *slog.Logger
	// ipv6Bits groups anonymous reporters' IPv6 addresses
	// (Limits.IPv6ClientPrefix).
	ipv6Bits int
}

// routes declares the report and quarantine routes.
func (g *quarantineAPI) routes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/v1/:ns/entries/:key/reports", Access: readNS, JSONBody: true, Handler: g.handleReport},
		{Method: http.MethodGet, Path: "/v1/:ns/entries/:key/reports", Access: adminNS, Handler: g.handleReports},
		{Method: http.MethodPost, Path: "/v1/:ns/entries/:key/quarantine", Access: adminNS, JSONBody: true, Handler: g.handleQuarantine},
		{Method: http.MethodPost, Path: "/v1/:ns/entries/:key/restore", Access: adminNS, Handler: g.handleRestore},
		{Method: http.MethodGet, Path: "/v1/:ns/quarantine", Access: adminNS, Handler: g.handleList},
	}
}

// newReportsCounter registers cachesvc_entry_reports_total.
func newReportsCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := withSeries(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cachesvc_entry_reports_total",
		Help: "Reports that an entry fetched from the cache failed to load, by result: recorded, quarantined (this report quarantined it), already_quarantined, not_found, error.",
	}, []string{"result"}), "recorded", "quarantined", "already_quarantined", "not_found", "error")
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("register report metrics: %w", err)
	}
	return c, nil
}

// available answers 501 when the store cannot quarantine.
func (g *quarantineAPI) available() error {
	if g.q == nil {
		return Errorf(http.StatusNotImplemented, "quarantine_unsupported", "This server's store cannot quarantine entries.")
	}
	return nil
}

// reportBody is the body of POST .../reports.
type reportBody struct {
	Reason string `json:"reason"`
	Client string `json:"client"`
}

// reasonBody is the body of POST .../quarantine.
type reasonBody struct {
	Reason string `json:"reason"`
}

// checkReason validates a reason or client id: required (unless optional),
// valid UTF-8, at most max bytes.
func checkReason(field, v string, max int, optional bool) error {
	switch {
	case v == "" && !optional:
		return Errorf(http.StatusBadRequest, "bad_report", "The %q field is required: say what failed (e.g. the deserializer's error).", field)
	case len(v) > max:
		return Errorf(http.StatusBadRequest, "bad_report", "The %q field is %d bytes; at most %d are allowed.", field, len(v), max)
	case !utf8.ValidString(v):
		return Errorf(http.StatusBadRequest, "bad_report", "The %q field is not valid UTF-8.", field)
	}
	return nil
}

// reporter is who a report comes from, for counting distinct reporters:
// the token's name when authentication is on, and the client id; without
// authentication the client id or, without one, the remote address. A
// request without a token under the anonymous rule is its address alone:
// anyone may send it, so a claimed client id proves nothing, and counting
// it let two anonymous reports quarantine any entry. An address counts as
// clientGroup has it with ipv6Bits (--ipv6-client-prefix), as one host
// may send from every address of a prefix it holds.
func reporter(c *fiber.Ctx, client string, ipv6Bits int) string {
	id, ok := requestIdentity(c)
	switch {
	case ok && id.Name == auth.AnonymousName:
		return auth.AnonymousName + "@" + requestClientGroup(c, ipv6Bits)
	case ok && client != "":
		return id.Name + "/" + client
	case ok:
		return id.Name
	case client != "":
		return client
	}
	return requestClientGroup(c, ipv6Bits)
}

// isAdmin reports whether the request's token has the admin scope in ns.
// Without authentication nobody is an admin for reports: the threshold
// always applies (POST .../quarantine quarantines at once).
func (g *quarantineAPI) isAdmin(c *fiber.Ctx, ns string) bool {
	if g.auth == nil {
		return false
	}
	secret, err := bearerToken(c)
	if err != nil {
		return false
	}
	_, err = g.auth.Authorize(secret, ns, auth.ScopeAdmin)
	return err == nil
}

// reportJSON is the answer of POST .../reports and .../quarantine.
type reportJSON struct {
	Namespace   string `json:"namespace"`
	Key         string `json:"key"`
	Reports     int64  `json:"reports"`
	Distinct    int    `json:"distinct_reporters"`
	Threshold   int    `json:"threshold"`
	Quarantined bool   `json:"quarantined"`
}

func (g *quarantineAPI) reportJSON(st store.ReportState) reportJSON {
	return reportJSON{Namespace: st.Namespace, Key: st.Key.String(), Reports: st.Total, Distinct: st.Distinct,
		Threshold: g.threshold, Quarantined: st.Quarantined}
}

// handleReport serves POST /v1/{ns}/entries/{key}/reports: 200 with the
// entry's report counts (quarantined true once it is), 404 when there is
// no such entry.
func (g *quarantineAPI) handleReport(c *fiber.Ctx) error {
	if err := g.available(); err != nil {
		return err
	}
	r := reqOf(c)
	var b reportBody
	if err := g.body.decodeJSON(c, &b, "reason"); err != nil {
		return err
	}
	if err := checkReason("reason", b.Reason, store.MaxReasonLen, false); err != nil {
		return err
	}
	if err := checkReason("client", b.Client, MaxClientIDLen, true); err != nil {
		return err
	}
	// Read first only to tell, in the metrics, a report that quarantined
	// the entry from one that found it quarantined (reports are rare).
	prev, perr := g.q.Reports(c.UserContext(), r.Namespace, r.Key)
	was := perr == nil && prev.Quarantined
	st, err := g.q.Report(c.UserContext(), r.Namespace, r.Key,
		store.Report{Reason: b.Reason, Reporter: reporter(c, b.Client, g.ipv6Bits)}, g.threshold, g.isAdmin(c, r.Namespace))
	result := "recorded"
	switch {
	case errors.Is(err, store.ErrNotFound):
		result = "not_found"
	case err != nil:
		result = "error"
	case was:
		result = "already_quarantined"
	case st.Quarantined:
		result = "quarantined"
	}
	g.reports.WithLabelValues(result).Inc()
	if err != nil {
		return entryErr(err, r.Namespace, r.Key)
	}
	return c.JSON(g.reportJSON(st))
}

// reportsJSON is the answer of GET .../reports.
type reportsJSON struct {
	reportJSON
	Reports       []store.Report `json:"recent"`
	QuarantinedAt *time.Time     `json:"quarantined_at,omitempty"`
	Cause         string         `json:"cause,omitempty"`
	Reason        string         `json:"reason,omitempty"`
	Restorable    bool           `json:"restorable"`
}

// handleReports serves GET /v1/{ns}/entries/{key}/reports: the last reports
// and the quarantine state; 404 when the entry is neither live nor
// quarantined.
func (g *quarantineAPI) handleReports(c *fiber.Ctx) error {
	if err := g.available(); err != nil {
		return err
	}
	r := reqOf(c)
	st, err := g.q.Reports(c.UserContext(), r.Namespace, r.Key)
	if err != nil {
		return entryErr(err, r.Namespace, r.Key)
	}
	out := reportsJSON{reportJSON: g.reportJSON(st), Reports: st.Reports, Cause: st.Cause, Reason: st.Reason, Restorable: st.Restorable}
	if out.Reports == nil {
		out.Reports = []store.Report{}
	}
	if st.Quarantined {
		out.QuarantinedAt = &st.QuarantinedAt
	}
	return c.JSON(out)
}

// handleQuarantine serves POST /v1/{ns}/entries/{key}/quarantine: the entry
// is quarantined now (200; already quarantined is 200 too), 404 on a miss.
func (g *quarantineAPI) handleQuarantine(c *fiber.Ctx) error {
	if err := g.available(); err != nil {
		return err
	}
	r := reqOf(c)
	var b reasonBody
	if err := g.body.decodeJSON(c, &b, "reason"); err != nil {
		return err
	}
	if err := checkReason("reason", b.Reason, store.MaxReasonLen, false); err != nil {
		return err
	}
	st, err := g.q.Quarantine(c.UserContext(), r.Namespace, r.Key, b.Reason)
	if err != nil {
		return entryErr(err, r.Namespace, r.Key)
	}
	g.log.Warn("entry quarantined by an admin", "namespace", r.Namespace, "key", r.Key.String(), "by", writerName(c), "reason", b.Reason)
	return c.JSON(g.reportJSON(st))
}

// handleRestore serves POST /v1/{ns}/entries/{key}/restore: the entry is
// served again, its reports cleared (200 with its metadata); 404 when it is
// not quarantined or its bytes are gone.
func (g *quarantineAPI) handleRestore(c *fiber.Ctx) error {
	if err := g.available(); err != nil {
		return err
	}
	r := reqOf(c)
	m, err := g.q.Restore(c.UserContext(), r.Namespace, r.Key)
	if errors.Is(err, store.ErrNotFound) {
		return &Error{Status: http.StatusNotFound, Code: "not_quarantined", Message: sentence(err.Error()), Err: err}
	}
	if err != nil {
		return err
	}
	indexEntry(g.stats, m) // its quarantine took it out (store.Config.OnQuarantine)
	g.log.Warn("entry restored from quarantine", "namespace", r.Namespace, "key", r.Key.String(), "by", writerName(c))
	return c.JSON(entryJSON{Meta: m, Key: m.Key.String(), SHA256: hex.EncodeToString(m.SHA256[:])})
}

// entryJSON is an entry's metadata with its key and digest.
type entryJSON struct {
	store.Meta
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
}

// quarantinedJSON is one entry of GET /v1/{ns}/quarantine.
type quarantinedJSON struct {
	entryJSON
	QuarantinedAt time.Time `json:"quarantined_at"`
	Cause         string    `json:"cause"`
	Reason        string    `json:"reason"`
	Reports       int64     `json:"reports"`
	Restorable    bool      `json:"restorable"`
}

// handleList serves GET /v1/{ns}/quarantine?after=<key>&limit=<n>: the
// quarantined entries of ns in key order, at most limit (default and
// maximum 1000); "next" is the cursor of the next page, "" at the end.
func (g *quarantineAPI) handleList(c *fiber.Ctx) error {
	if err := g.available(); err != nil {
		return err
	}
	r := reqOf(c)
	limit, err := pageLimit(c)
	if err != nil {
		return err
	}
	var after *cachekey.Key
	if v := c.Query("after"); v != "" {
		k, err := cachekey.ParseKey(v)
		if err != nil {
			return &Error{Status: http.StatusBadRequest, Code: "bad_cursor", Message: sentence("after: " + err.Error()), Err: err}
		}
		after = &k
	}
	out := make([]quarantinedJSON, 0, min(limit, 64))
	next := ""
	err = g.q.WalkQuarantined(c.UserContext(), r.Namespace, after, func(q store.Quarantined) bool {
		if len(out) == limit {
			next = out[len(out)-1].Key
			return false
		}
		m := q.Meta
		out = append(out, quarantinedJSON{
			entryJSON:     entryJSON{Meta: m, Key: m.Key.String(), SHA256: hex.EncodeToString(m.SHA256[:])},
			QuarantinedAt: q.QuarantinedAt, Cause: q.Cause, Reason: q.Reason, Reports: q.Reports, Restorable: q.Restorable,
		})
		return true
	})
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"namespace": r.Namespace, "entries": out, "next": next})
}
