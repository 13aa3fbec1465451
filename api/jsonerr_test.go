package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestJSONBodyErrors: every JSON body endpoint answers a body of the wrong
// shape with 400 bad_json naming the field and what it must be, and no Go
// type or struct names.
func TestJSONBodyErrors(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	lease := "/v1/default/leases/" + testKey(1)
	tests := []struct {
		name, method, path, body, want string
	}{
		{"ttl a string", "POST", lease, `{"holder":"h","ttl_s":"5"}`, `Field "ttl_s" must be a number, got string.`},
		{"holder a number", "POST", lease, `{"holder":5}`, `Field "holder" must be a string, got number.`},
		{"lease body an array", "POST", lease, `[1]`, `The request body must be an object, got array.`},
		{"lease unknown field, strict", "POST", lease + "?field_validation=strict", `{"holder":"h","ttl":5}`, `Unknown field "ttl": this endpoint reads "holder", "ttl_s".`},
		{"lease holder misspelt", "POST", lease, `{"hodler":"h","ttl_s":5}`, `Field "holder" is missing, and the body has unknown field "hodler": this endpoint reads "holder", "ttl_s".`},
		{"release holder a bool", "DELETE", lease, `{"holder":true}`, `Field "holder" must be a string, got bool.`},
		{"keys a string", "POST", "/v1/default/batch", `{"keys":"abc"}`, `Field "keys" must be an array, got string.`},
		{"key a number", "POST", "/v1/default/exists", `{"keys":[1]}`, `Each element of field "keys" must be a string, got number.`},
		{"syntax", "POST", "/v1/default/exists", `{"keys":[}`, `The request body is not valid JSON at byte 10: invalid character '}' looking for beginning of value.`},
		{"cut short", "POST", "/v1/default/batch", `{"keys":[`, `The request body ends in the middle of its JSON value.`},
		{"empty", "POST", lease, ``, `The request body is empty: send a JSON object.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			checkError(t, resp, 400, "bad_json", tt.want)
		})
	}
}
