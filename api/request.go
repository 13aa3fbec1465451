package api

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/wire"
)

// request is a request's input, parsed and validated once (parseRequest)
// before its handler runs: the route's {ns}, {key} and {run}, and the
// cachesvc headers. Handlers, stats and metrics read only this value, so
// every string in it is valid UTF-8, bounded, and owned (not an alias of
// fasthttp's reused buffers).
type request struct {
	// Namespace is the route's {ns}; "" on routes without one.
	Namespace string
	// Key is the route's {key} or, on lookup and keys, the key the
	// signature's plugin computed (keyFor); HasKey is false until one is known.
	Key    cachekey.Key
	HasKey bool
	// RunParam is the route's {run} (the manifest route).
	RunParam string
	// Run is X-Cachesvc-Run: the run this request belongs to, "" for none.
	Run string
	// Anonymous is true when the tokens file's anonymous rule authorized
	// the request (no token): its lookups count their run under _other in
	// the statistics (Lookup.Anonymous).
	Anonymous bool
	// Writer is true when the caller may write in Namespace (a token with
	// write scope there, or a server that checks no tokens): its lookups
	// admit the namespace into the statistics (Lookup.Writer).
	Writer bool
	// Backend is X-Cachesvc-Backend ("" when absent): the entry's backend
	// on a PUT, the missed program's backend on a GET.
	Backend string
	// Name is X-Cachesvc-Name, the entry's display name ("" when absent).
	Name string
	// CompileSeconds is X-Compile-Seconds, from 0 to
	// wire.MaxCompileSeconds.
	CompileSeconds float64
	// SHA256 is X-Content-SHA256, the digest the writer declares; nil when
	// absent.
	SHA256 *[32]byte
	// SignatureSHA256 is X-Cachesvc-Signature-Sha256, the digest of the
	// signature the client sends or means (keys, lookup); nil when absent.
	SignatureSHA256 *[32]byte

	// seen records which headers one pass over them found (scanHeaders),
	// so that a plain GET looks none of them up by name.
	seen headerSeen
}

// headerSeen is a set of the headers a request was found to carry.
type headerSeen uint8

const (
	seenScanned     headerSeen = 1 << iota // the others are valid
	seenX                                  // a header named X-...: every cachesvc header is
	seenRange                              // Range
	seenIfNoneMatch                        // If-None-Match
)

// header returns the request's header name (one of the set h) as c.Get
// does, without a lookup when the scan found none.
func (r *request) header(c *fiber.Ctx, h headerSeen, name string) string {
	if !r.mayHave(h) {
		return ""
	}
	return c.Get(name)
}

// mayHave reports whether the request may carry header h: false only when
// the scan ran and did not find it.
func (r *request) mayHave(h headerSeen) bool { return r.seen&seenScanned == 0 || r.seen&h != 0 }

// requestKey holds the parsed *request in fiber Locals.
const requestKey = "cachesvc.request"

// reqOf returns the request value parseRequest stored.
func reqOf(c *fiber.Ctx) *request {
	r, _ := c.Locals(requestKey).(*request)
	if r == nil {
		r = &request{}
	}
	return r
}

// parseRequest returns the middleware that parses and validates the
// request value (see request) and stores it for the handler. Only routes in
// a namespace carry the cachesvc headers; on the others (health, metrics,
// the dashboard) they are ignored. open is true when the server checks no
// tokens: every caller may then write anywhere.
func parseRequest(open bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		r, err := readRequest(c)
		if err != nil {
			return err
		}
		if id, ok := requestIdentity(c); ok {
			r.Anonymous, r.Writer = id.Anonymous, id.Writes
		} else {
			// No identity: tokens are off, or the route is public (no
			// caller to trust).
			r.Writer = open
		}
		c.Locals(requestKey, r)
		return c.Next()
	}
}

// readRequest reads the request value from c's route parameters and
// headers.
func readRequest(c *fiber.Ctx) (*request, error) {
	r := &request{}
	params := c.Route().Params
	if !hasParam(params, "ns") {
		return r, nil
	}
	ns, err := pathParam(c, "ns")
	if err == nil {
		err = cachekey.ValidateNamespace(ns)
	}
	if err != nil {
		return nil, &Error{Status: http.StatusBadRequest, Code: "bad_namespace", Message: sentence(err.Error()), Err: err}
	}
	r.Namespace = strings.Clone(ns)
	if hasParam(params, "key") {
		v, err := pathParam(c, "key")
		var k cachekey.Key
		if err == nil {
			k, err = cachekey.ParseKey(v)
		}
		if err != nil {
			return nil, &Error{Status: http.StatusBadRequest, Code: "bad_key", Message: sentence(err.Error()), Err: err}
		}
		r.Key, r.HasKey = k, true
	}
	if hasParam(params, "run") {
		run, err := pathParam(c, "run")
		if err == nil {
			err = manifest.ValidateRun(run)
		}
		if err != nil {
			return nil, &Error{Status: http.StatusBadRequest, Code: "bad_run", Message: sentence(err.Error()), Err: err}
		}
		r.RunParam = strings.Clone(run)
	}
	r.seen = scanHeaders(c)
	if !r.mayHave(seenX) {
		return r, nil // none of the cachesvc headers: nothing to read
	}
	return r, r.readHeaders(func(name string) string { return c.Get(name) })
}

// pathParam returns the route parameter name percent-decoded, once. fiber
// routes on the path as sent and leaves its parameters encoded, but RFC
// 3986 lets a client escape any character of a segment, and URL encoders
// escape a run id's ':', '@' and '+' (encodeURIComponent, Python's quote):
// "%3A" in a run id was refused. Decoding happens before validation, so a
// decoded '/' or upper-case letter is refused like a sent one. authorize
// reads the namespace the same way, so a token is checked against the
// namespace the request acts in.
func pathParam(c *fiber.Ctx, name string) (string, error) {
	return decodeParam(name, c.Params(name))
}

// decodeParam percent-decodes raw, the route parameter name as sent.
func decodeParam(name, raw string) (string, error) {
	if strings.IndexByte(raw, '%') < 0 {
		return raw, nil
	}
	v, err := url.PathUnescape(raw)
	if err != nil {
		return "", fmt.Errorf("the %s %s in the path has a malformed percent-escape: %% must be followed by two hex digits", paramNames[name], wire.Echo(raw))
	}
	return v, nil
}

// paramNames names the route parameters in messages.
var paramNames = map[string]string{"ns": "namespace", "key": "key", "run": "run id"}

// scanHeaders notes, in one pass over the request's headers, which of those
// the handlers read it carries: a plain GET has none, and the pass saves
// the eight lookups by name of readHeaders and handleGet (each normalizes
// the name and scans every header: about 5% of a small GET's CPU).
func scanHeaders(c *fiber.Ctx) headerSeen {
	seen := seenScanned
	c.Request().Header.VisitAll(func(k, _ []byte) {
		switch {
		case len(k) > 2 && k[0]|0x20 == 'x' && k[1] == '-':
			seen |= seenX
		case len(k) == len(fiber.HeaderRange) && strings.EqualFold(string(k), fiber.HeaderRange):
			seen |= seenRange
		case len(k) == len(fiber.HeaderIfNoneMatch) && strings.EqualFold(string(k), fiber.HeaderIfNoneMatch):
			seen |= seenIfNoneMatch
		}
	})
	return seen
}

// readHeaders validates the cachesvc headers, read through get (which
// returns "" for an absent header). A header that is present and invalid
// is a 400 naming it.
func (r *request) readHeaders(get func(string) string) error {
	if v := get(wire.HeaderRun); v != "" {
		if err := manifest.ValidateRun(v); err != nil {
			return &Error{Status: http.StatusBadRequest, Code: "bad_run", Message: sentence(wire.HeaderRun + ": " + err.Error()), Err: err}
		}
		r.Run = strings.Clone(v)
	}
	if v := get(wire.HeaderBackend); v != "" {
		if err := wire.CheckBackend(v); err != nil {
			return badHeader(wire.HeaderBackend, err)
		}
		r.Backend = strings.Clone(v)
	}
	if v := get(wire.HeaderName); v != "" {
		if err := wire.CheckName(v); err != nil {
			return badHeader(wire.HeaderName, err)
		}
		r.Name = strings.Clone(v)
	}
	if v := get(wire.HeaderCompileSeconds); v != "" {
		f, err := wire.ParseCompileSeconds(v)
		if err != nil {
			return badHeader(wire.HeaderCompileSeconds, err)
		}
		r.CompileSeconds = f
	}
	var err error
	if r.SHA256, err = sha256Header(get, wire.HeaderContentSHA256, "the body"); err != nil {
		return err
	}
	r.SignatureSHA256, err = sha256Header(get, wire.HeaderSignatureSHA256, "the signature")
	return err
}

// sha256Header parses the optional header name, a SHA-256 of what in hex.
func sha256Header(get func(string) string, name, what string) (*[32]byte, error) {
	v := get(name)
	if v == "" {
		return nil, nil
	}
	var d [32]byte
	if len(v) != 64 {
		return nil, Errorf(http.StatusBadRequest, "bad_header", "%s must be 64 hex characters (the SHA-256 of %s), got %d characters.", name, what, len(v))
	}
	if _, err := hex.Decode(d[:], []byte(v)); err != nil {
		return nil, Errorf(http.StatusBadRequest, "bad_header", "%s must be 64 hex characters (the SHA-256 of %s): %s.", name, what, err)
	}
	return &d, nil
}

// badHeader is the 400 for an invalid header value.
func badHeader(name string, err error) error {
	return &Error{Status: http.StatusBadRequest, Code: "bad_header", Message: sentence(name + ": " + err.Error()), Err: err}
}

// hasParam reports whether a route declares the parameter name.
func hasParam(params []string, name string) bool {
	for _, p := range params {
		if p == name {
			return true
		}
	}
	return false
}
