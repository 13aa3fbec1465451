package api_test

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestUnknownBodyFieldsWarn: a JSON body with a field this server does not
// know (a newer client's optional field, during a rolling upgrade) is
// answered as if the field were absent, with one RFC 7234 Warning per field
// naming it; a required field that is missing beside an unknown one (a
// typo) is 400 bad_json naming both; ?field_validation=strict refuses
// unknown fields as before.
func TestUnknownBodyFieldsWarn(t *testing.T) {
	var logs bytes.Buffer
	srv := apitest.Start(t, apitest.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	lease := func(i int) string { return srv.URL + "/v1/default/leases/" + testKey(i) }
	many := `{"holder":"h","f0":1,"f1":1,"f2":1,"f3":1,"f4":1,"f5":1,"f6":1,"f7":1,"f8":1,"f9":1}`
	tests := []struct {
		name, method, url, body string
		status                  int
		code, message           string   // for an error answer
		warnings                []string // Warning header values, in order
	}{
		{name: "lease with a new optional field", method: "POST", url: lease(1), body: `{"holder":"h","ttl_s":5,"priority":3}`,
			status: 201, warnings: []string{`299 - "unknown field \"priority\" ignored"`}},
		{name: "exists with two new fields", method: "POST", url: srv.URL + "/v1/default/exists", body: `{"keys":["` + testKey(1) + `"],"zeta":[1],"alpha":{"x":1}}`,
			status: 200, warnings: []string{`299 - "unknown field \"alpha\" ignored"`, `299 - "unknown field \"zeta\" ignored"`}},
		{name: "release with a new field", method: "DELETE", url: lease(1), body: `{"holder":"h","reason":"done"}`,
			status: 204, warnings: []string{`299 - "unknown field \"reason\" ignored"`}},
		{name: "a known field in another case is known", method: "POST", url: lease(2), body: `{"Holder":"h","TTL_S":5}`,
			status: 201},
		{name: "a field name that needs escaping", method: "POST", url: lease(3), body: `{"holder":"h","a\"b\\c\nd\u00e9":1}`,
			status: 201, warnings: []string{`299 - "unknown field \"a\\\"b\\\\c\\nd\\u00e9\" ignored"`}},
		{name: "at most eight named", method: "POST", url: lease(4), body: many, status: 201,
			warnings: []string{`299 - "unknown field \"f0\" ignored"`, `299 - "unknown field \"f1\" ignored"`, `299 - "unknown field \"f2\" ignored"`,
				`299 - "unknown field \"f3\" ignored"`, `299 - "unknown field \"f4\" ignored"`, `299 - "unknown field \"f5\" ignored"`,
				`299 - "unknown field \"f6\" ignored"`, `299 - "unknown field \"f7\" ignored"`, `299 - "2 more unknown fields ignored"`}},
		{name: "a typo of a required field", method: "POST", url: lease(5), body: `{"hodler":"h","ttl_s":5}`,
			status: 400, code: "bad_json", message: `Field "holder" is missing, and the body has unknown field "hodler": this endpoint reads "holder", "ttl_s".`},
		{name: "a typo of the keys", method: "POST", url: srv.URL + "/v1/default/batch", body: `{"key":["` + testKey(1) + `"]}`,
			status: 400, code: "bad_json", message: `Field "keys" is missing, and the body has unknown field "key": this endpoint reads "keys".`},
		{name: "a required field missing alone", method: "POST", url: lease(6), body: `{"ttl_s":5}`,
			status: 400, code: "bad_holder", message: `"holder" must be 1 to 256 bytes`},
		{name: "strict refuses an unknown field", method: "POST", url: lease(7) + "?field_validation=strict", body: `{"holder":"h","priority":3}`,
			status: 400, code: "bad_json", message: `Unknown field "priority": this endpoint reads "holder", "ttl_s".`},
		{name: "warn is the default", method: "POST", url: lease(8) + "?field_validation=warn", body: `{"holder":"h","priority":3}`,
			status: 201, warnings: []string{`299 - "unknown field \"priority\" ignored"`}},
		{name: "a bad field_validation", method: "POST", url: lease(9) + "?field_validation=Strict", body: `{"holder":"h"}`,
			status: 400, code: "bad_field_validation", message: `?field_validation= must be strict or warn, got "Strict".`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := srv.Do(tt.method, tt.url, strings.NewReader(tt.body), "Content-Type", "application/json")
			warnings := resp.Header.Values("Warning")
			if tt.code != "" {
				checkError(t, resp, tt.status, tt.code, tt.message)
			} else if body := apitest.ReadAll(t, resp); resp.StatusCode != tt.status {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tt.status)
			}
			if !slices.Equal(warnings, tt.warnings) {
				t.Errorf("Warning headers:\n got %q\nwant %q", warnings, tt.warnings)
			}
		})
	}
	if !strings.Contains(logs.String(), `msg="unknown request body fields ignored"`) || !strings.Contains(logs.String(), `fields=[priority] count=1`) ||
		!strings.Contains(logs.String(), "key="+testKey(1)) {
		t.Errorf("no debug line naming the ignored fields and the key:\n%s", logs.String())
	}
}

// TestUnknownFieldsCounted: cachesvc_request_unknown_fields_total counts,
// by route pattern and method, each request whose body had fields the
// server ignored, once however many there were; a request refused instead
// (strict, or a typo of a required field) and one without unknown fields
// are not counted. Every JSON-body route exports its series at 0 from the
// start, so that the first newer client of a rolling upgrade shows as an
// increase.
func TestUnknownFieldsCounted(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	series := func(method, route string) string {
		return `cachesvc_request_unknown_fields_total{method="` + method + `",route="` + route + `"}`
	}
	const leaseRoute = "/v1/:ns/leases/:key"
	jsonRoutes := []string{
		series("POST", "/v1/:ns/batch"), series("POST", "/v1/:ns/exists"),
		series("POST", leaseRoute), series("DELETE", leaseRoute),
		series("POST", "/v1/:ns/entries/:key/reports"), series("POST", "/v1/:ns/entries/:key/quarantine"),
	}
	for _, s := range jsonRoutes {
		if v := srv.Metric(s); v != 0 {
			t.Errorf("%s = %v at start, want 0 (-1: not exported)", s, v)
		}
	}
	lease := func(i int) string { return srv.URL + "/v1/default/leases/" + testKey(i) }
	entry := srv.URL + "/v1/default/entries/" + testKey(1)
	keys := `{"keys":["` + testKey(1) + `"],"priority":1}`
	tests := []struct {
		name, method, url, body string
		series                  string
		add                     float64 // what the request adds to series
	}{
		{"lease, one unknown field", "POST", lease(1), `{"holder":"h","priority":3}`, series("POST", leaseRoute), 1},
		{"lease, ten unknown fields count once", "POST", lease(2), `{"holder":"h","f0":1,"f1":1,"f2":1,"f3":1,"f4":1,"f5":1,"f6":1,"f7":1,"f8":1,"f9":1}`, series("POST", leaseRoute), 1},
		{"lease, none unknown", "POST", lease(3), `{"holder":"h","ttl_s":5}`, series("POST", leaseRoute), 0},
		{"lease, strict refuses", "POST", lease(4) + "?field_validation=strict", `{"holder":"h","priority":3}`, series("POST", leaseRoute), 0},
		{"lease, a typo refused", "POST", lease(5), `{"hodler":"h"}`, series("POST", leaseRoute), 0},
		{"release", "DELETE", lease(1), `{"holder":"h","reason":"done"}`, series("DELETE", leaseRoute), 1},
		{"batch", "POST", srv.URL + "/v1/default/batch", keys, series("POST", "/v1/:ns/batch"), 1},
		{"exists", "POST", srv.URL + "/v1/default/exists", keys, series("POST", "/v1/:ns/exists"), 1},
		{"report of an absent entry", "POST", entry + "/reports", `{"reason":"x","why":1}`, series("POST", "/v1/:ns/entries/:key/reports"), 1},
		{"quarantine of an absent entry", "POST", entry + "/quarantine", `{"reason":"x","why":1}`, series("POST", "/v1/:ns/entries/:key/quarantine"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := srv.Metric(tt.series)
			resp := srv.Do(tt.method, tt.url, strings.NewReader(tt.body), "Content-Type", "application/json")
			apitest.ReadAll(t, resp)
			if got := srv.Metric(tt.series); got != before+tt.add {
				t.Errorf("%s: got %v after %d, want %v", tt.series, got, resp.StatusCode, before+tt.add)
			}
		})
	}
}

// TestJSONBodyRoutesMarked holds Route.JSONBody to what the handlers do:
// a route reads its body with decodeJSON, and so refuses a bad
// ?field_validation=, exactly when it is marked, so that every such route
// exports its cachesvc_request_unknown_fields_total series from the start.
func TestJSONBodyRoutesMarked(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	fill := strings.NewReplacer(":ns", "default", ":key", testKey(1), ":run", "r1")
	marked := 0
	for _, r := range srv.API.Routes() {
		if r.JSONBody {
			marked++
		}
		resp := srv.Do(r.Method, srv.URL+fill.Replace(r.Path)+"?field_validation=Strict", strings.NewReader("{}"), "Content-Type", "application/json")
		body := apitest.ReadAll(t, resp)
		decodes := resp.StatusCode == 400 && bytes.Contains(body, []byte(`"code":"bad_field_validation"`))
		if decodes != r.JSONBody {
			t.Errorf("%s %s: JSONBody is %v, but it answered %d %.200s to ?field_validation=Strict", r.Method, r.Path, r.JSONBody, resp.StatusCode, body)
		}
	}
	if marked < 6 {
		t.Errorf("only %d routes marked JSONBody, want the 6 that read JSON bodies at least", marked)
	}
}

// TestBadFieldValidationWithoutBody: a misspelt ?field_validation= is 400
// bad_field_validation on every route that takes it, also when the request
// has no body to decode: a release by ?holder= with
// ?field_validation=strcit is refused, and the lease stays held. Before,
// the value was read only when a body was decoded, so that request
// released the lease and the typo went unnoticed.
func TestBadFieldValidationWithoutBody(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	lease := srv.URL + "/v1/default/leases/" + testKey(30)
	if resp := srv.Do("POST", lease, strings.NewReader(`{"holder":"h"}`), "Content-Type", "application/json"); resp.StatusCode != 201 {
		t.Fatalf("acquire: %d %s", resp.StatusCode, apitest.ReadAll(t, resp))
	}
	tests := []struct {
		name, method, url string
		status            int
		code, message     string
	}{
		{"release by ?holder= with a typo", "DELETE", lease + "?holder=h&field_validation=strcit",
			400, "bad_field_validation", `?field_validation= must be strict or warn, got "strcit".`},
		{"release of no lease with a typo", "DELETE", srv.URL + "/v1/default/leases/" + testKey(31) + "?holder=h&field_validation=Warn",
			400, "bad_field_validation", `?field_validation= must be strict or warn, got "Warn".`},
		{"an empty value is the default", "DELETE", srv.URL + "/v1/default/leases/" + testKey(31) + "?holder=h&field_validation=",
			404, "lease_not_found", ""},
		{"the lease is still held, and strict releases it", "DELETE", lease + "?holder=h&field_validation=strict", 204, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := srv.Do(tt.method, tt.url, nil)
			if tt.code != "" {
				checkError(t, resp, tt.status, tt.code, tt.message)
			} else if body := apitest.ReadAll(t, resp); resp.StatusCode != tt.status {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tt.status)
			}
		})
	}
}
