// Package client is a Go client for cachesvc's v1 HTTP API, used by the
// `cachesvc warm` and `cachesvc agent` subcommands, by integration tests and
// by any Go program that embeds the cache (Example: look up, compile on a
// miss, store). Entries live under a namespace ("default" unless the
// operator made others) and a key of 64 lowercase hex characters, which
// Keys computes from a signature on a server with plugins.
//
// Every method takes a context, streams bodies (nothing is buffered whole)
// and returns an *Error for a JSON error response, so callers can match the
// server's error code.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// Config configures a Client. Only BaseURL is required.
type Config struct {
	// BaseURL is the server, e.g. "http://127.0.0.1:8080".
	BaseURL string
	// HTTPClient sends requests; nil means a client with keep-alive
	// connections and no overall timeout (bodies may be large; use contexts).
	HTTPClient *http.Client
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token string
	// TLS, when set, configures https connections; its Certificates are
	// the client certificate presented to a server that requires one
	// (serve --tls-client-ca). Nil means the system's trusted roots
	// (SSL_CERT_FILE) and no client certificate. It applies only when
	// HTTPClient is nil; New keeps a copy.
	TLS *tls.Config
	// Run, when set, is sent as X-Cachesvc-Run on every request so the server
	// records this run's manifest.
	Run string
	// UserAgent overrides the default "cachesvc-go-client".
	UserAgent string
	// StallTimeout, when positive, fails a request whose connection has
	// moved no byte in either direction for this long (a hung server or a
	// silent network), instead of waiting forever; progress in either
	// direction keeps a slow transfer going. It applies only when
	// HTTPClient is nil; then a long poll's slices (WaitSlice) are kept to
	// 0.8 times it, since a parked slice moves no byte until it answers.
	StallTimeout time.Duration
	// WaitSlice is the longest single ?wait= request of a long poll (Get
	// with a wait): a longer wait is sent as slices of at most this, each
	// continuing the last (&waited=), so that a reverse proxy's read
	// timeout does not cut it; a proxy that cuts one all the same (its own
	// 504) makes the slices 0.8 times the cut. 0 means 50 s; at most 300 s
	// (the server's bound on one ?wait=), and with StallTimeout at most 0.8
	// times it (not under 1 s), so that a wait does not end in ErrStalled.
	WaitSlice time.Duration
	// Logger receives each distinct Warning a server answers with, once
	// (warning.go): an older server ignoring a field this client sends.
	// Nil means slog.Default().
	Logger *slog.Logger
}

// Client talks to one cachesvc server. It is safe for concurrent use.
type Client struct {
	base *url.URL
	cfg  Config
	hc   *http.Client
	// slice is the long polls' current slice in nanoseconds: WaitSlice,
	// or less after a proxy cut one (longpoll.go).
	slice atomic.Int64
	// warned holds the server warnings logged (warning.go).
	warned warnings
}

// ParseBaseURL parses a server's base URL as New takes it: http or https,
// with a host; a trailing slash is dropped.
func ParseBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("server URL %q is not an http(s) URL such as http://cache:8080", s)
	}
	return u, nil
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	u, err := ParseBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
			TLSClientConfig:     cfg.TLS.Clone(),
		}
		if cfg.StallTimeout > 0 {
			// stallconn.go; idle connections close before their deadline.
			tr.DialContext = stallDialer(cfg.StallTimeout)
			tr.IdleConnTimeout = min(tr.IdleConnTimeout, cfg.StallTimeout/2)
		}
		hc = &http.Client{Transport: tr}
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "cachesvc-go-client"
	}
	switch {
	case cfg.WaitSlice <= 0:
		cfg.WaitSlice = defaultWaitSlice
	case cfg.WaitSlice > maxWait:
		cfg.WaitSlice = maxWait
	}
	if cfg.StallTimeout > 0 && cfg.HTTPClient == nil {
		// A parked slice is silent until it answers: one longer than the
		// stall timeout would fail every wait as a hung server.
		cfg.WaitSlice = min(cfg.WaitSlice, max(time.Duration(0.8*float64(cfg.StallTimeout)), minSlice))
	}
	c := &Client{base: u, cfg: cfg, hc: hc}
	c.slice.Store(int64(cfg.WaitSlice))
	return c, nil
}

// Error is a JSON error response from the server.
type Error struct {
	Status  int
	Code    string
	Message string
	// RequestID is the answer's X-Request-Id: the operator finds the
	// request's server log line by it (key request_id). "" when the
	// answer had none (a proxy's own page, an older server).
	RequestID string
	// Body holds the whole decoded JSON body (for extra fields such as a
	// lease holder).
	Body map[string]any
}

// Error returns "server said status code: message", and the request id
// to quote to the operator when the server named one.
func (e *Error) Error() string {
	if e.RequestID != "" {
		return fmt.Sprintf("server said %d %s: %s (request id %s)", e.Status, e.Code, e.Message, e.RequestID)
	}
	return fmt.Sprintf("server said %d %s: %s", e.Status, e.Code, e.Message)
}

// IsNotFound reports whether err is a 404 from the server.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

func (c *Client) url(ns string, parts ...string) string {
	p := "/v1/" + url.PathEscape(ns)
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return c.base.String() + p
}

func (c *Client) newRequest(ctx context.Context, method, u string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("build request %s %s: %w", method, u, err)
	}
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	if c.cfg.Run != "" {
		req.Header.Set(wire.HeaderRun, c.cfg.Run)
	}
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	return req, nil
}

// do sends req; a status outside ok is turned into an *Error (body closed).
func (c *Client) do(req *http.Request, ok ...int) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err // a *url.Error: it names the method and URL
	}
	c.noteWarnings(req, resp)
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp, nil
		}
	}
	defer resp.Body.Close()
	return nil, decodeError(resp)
}

func decodeError(resp *http.Response) error {
	e := &Error{Status: resp.StatusCode, RequestID: wire.OneLine(resp.Header.Get(wire.HeaderRequestID), wire.MaxRequestIDLen)}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
		if e.RequestID == "" {
			e.RequestID = wire.OneLine(body.Error.RequestID, wire.MaxRequestIDLen)
		}
		_ = json.Unmarshal(data, &e.Body)
	} else if code := resp.Header.Get(wire.HeaderError); code != "" { // a HEAD's answer: no body
		e.Code, e.Message = code, http.StatusText(resp.StatusCode)
	} else if resp.Request != nil && resp.Request.Method == http.MethodHead {
		// No body to judge by (a server from before X-Cachesvc-Error).
		e.Code, e.Message = "http_"+strconv.Itoa(resp.StatusCode), http.StatusText(resp.StatusCode)
	} else {
		// Not cachesvc's JSON: another service answered (an S3 endpoint, a
		// proxy's page). Quote its start, not up to 64 KiB of XML or HTML.
		e.Code = "http_" + strconv.Itoa(resp.StatusCode)
		e.Message = wire.ForeignAnswer(resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	return e
}

// postJSON posts v and decodes the JSON answer into out.
func (c *Client) postJSON(ctx context.Context, u string, v, out any, ok ...int) (int, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("encode request: %w", err)
	}
	req, err := c.newRequest(ctx, http.MethodPost, u, bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.do(req, ok...)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s answer: %w", req.URL.Path, err)
		}
	}
	return resp.StatusCode, nil
}

// KeyResult is the answer of POST /v1/{ns}/keys.
type KeyResult = wire.KeyResponse

// Keys turns a signature into its key.
func (c *Client) Keys(ctx context.Context, ns string, signature any) (KeyResult, error) {
	var kr KeyResult
	_, err := c.postJSON(ctx, c.url(ns, "keys"), signature, &kr, http.StatusOK)
	return kr, err
}

// JAXKeySignature is the passthrough signature under which a JAX cache key
// (e.g. "jit_f-<64 hex>") is stored.
func JAXKeySignature(jaxKey string) map[string]string {
	return map[string]string{"backend": "passthrough", "kind": "jax", "key": jaxKey}
}

// PutOptions are the optional headers of a PUT.
type PutOptions struct {
	// Size is the body length, or -1 when unknown (chunked upload). 0 means
	// not given: the length of a *bytes.Reader, *bytes.Buffer or
	// *strings.Reader, any other reader sent chunked.
	Size int64
	// SHA256, when set, is sent as X-Content-SHA256 and verified by the server.
	SHA256         []byte
	CompileSeconds float64
	Backend        string
	Name           string
}

// Put stores r under (ns, key). created is false when identical bytes were
// already stored.
func (c *Client) Put(ctx context.Context, ns, key string, r io.Reader, o PutOptions) (created bool, err error) {
	req, err := c.newRequest(ctx, http.MethodPut, c.url(ns, "entries", key), r)
	if err != nil {
		return false, err
	}
	// Size 0 is "not given" (PutOptions are optional): keep the length
	// NewRequest found for a *bytes.Reader, *bytes.Buffer or *strings.Reader,
	// or send any other reader chunked. Forcing 0 stored an empty entry.
	if o.Size != 0 {
		req.ContentLength = o.Size
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if o.SHA256 != nil {
		req.Header.Set(wire.HeaderContentSHA256, hex.EncodeToString(o.SHA256))
	}
	if o.CompileSeconds > 0 {
		req.Header.Set(wire.HeaderCompileSeconds, strconv.FormatFloat(o.CompileSeconds, 'f', -1, 64))
	}
	if o.Backend != "" {
		req.Header.Set(wire.HeaderBackend, o.Backend)
	}
	if o.Name != "" {
		req.Header.Set(wire.HeaderName, o.Name)
	}
	resp, err := c.do(req, http.StatusCreated, http.StatusOK)
	if err != nil {
		return false, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode == http.StatusCreated, nil
}

// Get returns the entry's body; the caller must close it. wait > 0 long-polls
// behind a compile lease (?wait=), in slices of at most Config.WaitSlice
// while the lease lives (longpoll.go). A wait is for a key this client
// already looked up and missed: the server counted that miss, so a wait
// that ends empty counts none and a hit counts as a wait hit (misses minus
// wait hits are the compiles run). A miss is an *Error with Status 404;
// its Code says why a wait ended empty (not_found: no lease, or it ended
// without the entry; wait_timeout: wait ran out with the holder still at
// it). A 503 too_many_waiters means the server parks no more waiters:
// compile yourself, as the Python client's Lease.wait does.
func (c *Client) Get(ctx context.Context, ns, key string, wait time.Duration) (*http.Response, error) {
	u := c.url(ns, "entries", key)
	if wait > 0 {
		return c.longPoll(ctx, u, wait)
	}
	req, err := c.newRequest(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return c.do(req, http.StatusOK)
}

// Exists reports which keys are present.
func (c *Client) Exists(ctx context.Context, ns string, keys []string) (present, missing []string, err error) {
	var out wire.ExistsResponse
	_, err = c.postJSON(ctx, c.url(ns, "exists"), wire.KeysRequest{Keys: keys}, &out, http.StatusOK)
	return out.Present, out.Missing, err
}

// KeyRecord is one key of a run manifest.
type KeyRecord = wire.KeyRecord

// Manifest is a run's manifest.
type Manifest = wire.Manifest

// Manifest fetches GET /v1/{ns}/runs/{run}/manifest.
func (c *Client) Manifest(ctx context.Context, ns, run string) (Manifest, error) {
	var m Manifest
	req, err := c.newRequest(ctx, http.MethodGet, c.url(ns, "runs", run, "manifest"), nil)
	if err != nil {
		return m, err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return m, fmt.Errorf("decode manifest: %w", err)
	}
	return m, nil
}

// Lease is a compile lease as the server reports it.
type Lease struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
	// Renewed is true when holder already held the live lease: the request
	// renewed it (an older server never sets it). From AcquireLease, not
	// granted: another goroutine of this holder compiles; from RenewLease,
	// granted.
	Renewed bool `json:"renewed"`
	// Code says why a lease was refused (409): "lease_held" (Holder
	// compiles: Get with a wait for its entry) or "entry_exists" (written
	// since the caller's miss, Holder empty: Get it with a wait too, which
	// answers at once, so that the hit counts as answering that miss).
	// Empty when granted.
	Code string `json:"-"`
}

// AcquireLease asks for the compile lease on key, for a caller that has
// not taken it yet (to extend a lease it took, use RenewLease). granted is
// true (201) when this call gave holder the lease: compile, then Put (which
// releases it) or ReleaseLease. It is false when someone else compiles:
// another holder (409, l.Code "lease_held"), or one of this process's own
// goroutines, since holders name a process (the server renews the lease for
// the second asker, 201 with "renewed": l.Renewed is true, l.Code
// "lease_held" and l.Holder is holder); or the entry exists (409, l.Code
// "entry_exists"). When not granted, wait for the entry with Get and a
// wait, as the Python client's Lease does. A server older than "renewed"
// grants every asker of one holder.
func (c *Client) AcquireLease(ctx context.Context, ns, key, holder string, ttl time.Duration) (l Lease, granted bool, err error) {
	l, granted, err = c.postLease(ctx, ns, key, holder, ttl)
	if granted && l.Renewed {
		// Another goroutine of this holder took it and compiles.
		l.Code = "lease_held"
		return l, false, nil
	}
	return l, granted, err
}

// RenewLease extends the lease holder took with AcquireLease, for a
// compile that outlasts its ttl (renew every ttl/4 or so): ttl counts from
// now, and never moves the expiry earlier. granted is true (201) while
// holder holds the lease (l.Renewed), or again if it lapsed and nobody took
// it; false (409) when another holder took it after it lapsed (l.Code
// "lease_held") or the entry was written (l.Code "entry_exists").
func (c *Client) RenewLease(ctx context.Context, ns, key, holder string, ttl time.Duration) (l Lease, granted bool, err error) {
	return c.postLease(ctx, ns, key, holder, ttl)
}

// postLease posts holder's lease request on key: granted is true on a 201,
// renewal or not.
func (c *Client) postLease(ctx context.Context, ns, key, holder string, ttl time.Duration) (l Lease, granted bool, err error) {
	ttlS := ttl.Seconds()
	body := wire.LeaseRequest{Holder: holder, TTL: &ttlS}
	data, _ := json.Marshal(body)
	req, err := c.newRequest(ctx, http.MethodPost, c.url(ns, "leases", key), bytes.NewReader(data))
	if err != nil {
		return l, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return l, false, fmt.Errorf("acquire lease: %w", err)
	}
	c.noteWarnings(req, resp)
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusCreated, http.StatusConflict:
		var body struct {
			Lease
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return l, false, fmt.Errorf("decode lease: %w", err)
		}
		l = body.Lease
		if resp.StatusCode == http.StatusConflict {
			l.Code = body.Error.Code
		}
		return l, resp.StatusCode == http.StatusCreated, nil
	default:
		return l, false, decodeError(resp)
	}
}

// ReleaseLease releases holder's lease on key without writing the entry.
func (c *Client) ReleaseLease(ctx context.Context, ns, key, holder string) error {
	req, err := c.newRequest(ctx, http.MethodDelete, c.url(ns, "leases", key)+"?holder="+url.QueryEscape(holder), nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusOK, http.StatusNoContent)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}
