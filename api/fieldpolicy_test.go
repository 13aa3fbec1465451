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
