package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/wire"
)

// The unknown-field policy of JSON request bodies (decodeJSON), as
// Kubernetes' fieldValidation: by default a field this server does not know
// is ignored with a warning, so that during a rolling upgrade a newer
// client's new optional field does not fail against an older server; a
// client that sends a field whose being ignored would change what the
// request does (a precondition, a dry run) asks for ?field_validation=strict,
// which every server from this policy on honours and servers before it
// applied always. Fields are matched as encoding/json matches them: exactly,
// else case-insensitively.
//
// A signature (the body of /keys and /lookup) is outside this policy: the
// server reads only its "backend", and the rest is the plugin's document.
// Ignoring a field there, as this policy does, would give two different
// compilations one key, so plugins refuse a field they do not know or key
// it (plugins/ABI.md), whatever ?field_validation says.

// fieldValidationParam is the query parameter that picks the policy.
const fieldValidationParam = "field_validation"

// Field validation policies (?field_validation=).
const (
	fieldsWarn   = "warn"   // the default: ignore, and say so in a Warning
	fieldsStrict = "strict" // 400 bad_json
)

// maxFieldWarnings bounds the Warning headers of one answer; the fields past
// it are counted in one more.
const maxFieldWarnings = 8

// maxWarnedNameLen bounds a field name quoted in a Warning (bytes).
const maxWarnedNameLen = 64

// strictFields reports whether the request asks for unknown fields to be
// refused (?field_validation=strict); another value than strict or warn is
// 400 bad_field_validation, lest a misspelt "strict" be taken as warn.
func strictFields(c *fiber.Ctx) (bool, error) {
	switch v := c.Query(fieldValidationParam); v {
	case "", fieldsWarn:
		return false, nil
	case fieldsStrict:
		return true, nil
	default:
		return false, Errorf(http.StatusBadRequest, "bad_field_validation",
			"?%s= must be %s or %s, got %s.", fieldValidationParam, fieldsStrict, fieldsWarn, wire.Echo(v))
	}
}

// vetFieldValidation refuses a bad ?field_validation= before the handler
// of a route that takes it runs: decodeJSON reads it only when there is a
// body to decode, so a request without one (a lease release by ?holder=)
// or one the handler refuses first would otherwise do what it asks with
// the misspelt policy silently ignored.
func vetFieldValidation(c *fiber.Ctx) error {
	if _, err := strictFields(c); err != nil {
		return err
	}
	return c.Next()
}

// isUnknownField reports whether err is encoding/json's refusal of a field
// the target struct lacks (Decoder.DisallowUnknownFields): it has no type.
func isUnknownField(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if strings.HasPrefix(err.Error(), "json: unknown field ") {
			return true
		}
	}
	return false
}

// bodyFields returns the names of the top-level fields of the JSON object
// data that the struct v points to lacks (unknown, sorted), and those of
// required that data lacks (missing). A field counts as present even when
// null: the handler checks its value.
func bodyFields(data []byte, v any, required []string) (unknown, missing []string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil {
		return nil, nil // not an object: decoding v refused it already
	}
	known := jsonNames(v)
	for name := range obj {
		if !slices.ContainsFunc(known, func(k string) bool { return strings.EqualFold(k, name) }) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, r := range required {
		found := false
		for name := range obj {
			if strings.EqualFold(name, r) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, r)
		}
	}
	return unknown, missing
}

// missingFieldMessage says that the required field name is missing and
// which unknown fields the body has instead (likely a misspelling of it).
func missingFieldMessage(name string, unknown []string, v any) string {
	quoted := make([]string, 0, min(len(unknown), maxFieldWarnings))
	for _, u := range unknown[:min(len(unknown), maxFieldWarnings)] {
		quoted = append(quoted, quoteFieldName(u))
	}
	what := "unknown field " + quoted[0]
	if len(unknown) > 1 {
		what = "unknown fields " + strings.Join(quoted, ", ")
		if len(unknown) > len(quoted) {
			what += fmt.Sprintf(" and %d more", len(unknown)-len(quoted))
		}
	}
	return fmt.Sprintf("Field %q is missing, and the body has %s: this endpoint reads %s.", name, what, strings.Join(jsonFields(v), ", "))
}

// warnUnknownFields adds to the answer a Warning header (RFC 7234 section
// 5.5, warn-code 299, as Kubernetes sends) per ignored field, at most
// maxFieldWarnings and one counting the rest:
//
//	Warning: 299 - "unknown field \"priority\" ignored"
//
// Header values are printable ASCII: a name is quoted as Go quotes it,
// escaping everything else, and cut to maxWarnedNameLen bytes.
func warnUnknownFields(c *fiber.Ctx, unknown []string) {
	h := &c.Response().Header
	for i, name := range unknown {
		if i == maxFieldWarnings {
			h.Add(fiber.HeaderWarning, warning(fmt.Sprintf("%d more unknown fields ignored", len(unknown)-i)))
			return
		}
		h.Add(fiber.HeaderWarning, warning("unknown field "+quoteFieldName(name)+" ignored"))
	}
}

// quoteFieldName quotes a field name a client sent, in printable ASCII and
// at most maxWarnedNameLen bytes of it.
func quoteFieldName(name string) string {
	if len(name) > maxWarnedNameLen {
		name = strings.ToValidUTF8(name[:maxWarnedNameLen], "") + "..."
	}
	return strconv.QuoteToASCII(name)
}

// warning is a Warning header value with code 299 ("miscellaneous
// persistent warning"), no agent, and text as its quoted-string.
func warning(text string) string {
	return `299 - "` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(text) + `"`
}

// newUnknownFieldsCounter registers on reg the count of requests whose JSON
// body had fields this server ignored: the one place an operator sees,
// without debug logs, that clients newer than this server are talking to
// it (a rolling upgrade under way, or one left half done). Its labels are
// the route pattern and method, never the field names, which clients pick.
func newUnknownFieldsCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cachesvc_request_unknown_fields_total",
		Help: "Requests whose JSON body had fields this server does not know and ignored (each named in a Warning header and, at debug level, the log), counted once per request, by route pattern and method; ?field_validation=strict refusals are not counted.",
	}, []string{"route", "method"})
	if err := reg.Register(vec); err != nil {
		return nil, fmt.Errorf("register unknown field metrics: %w", err)
	}
	return vec, nil
}

// exportUnknownFieldSeries creates vec's series of every route that reads
// a JSON body, at 0, so that the first request with an ignored field shows
// as an increase.
func exportUnknownFieldSeries(vec *prometheus.CounterVec, routes []Route) {
	for _, r := range routes {
		if r.JSONBody {
			vec.WithLabelValues(r.Path, r.Method)
		}
	}
}
