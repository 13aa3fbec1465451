package api_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/wire"
)

// openAPIDoc is the part of the OpenAPI document the route check reads.
type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Parameters map[string]openAPIParameter `json:"parameters"`
	} `json:"components"`
}

// openAPIOperation is one operation's access rule and parameters.
type openAPIOperation struct {
	OperationID string             `json:"operationId"`
	Access      string             `json:"x-cachesvc-access"`
	Parameters  []openAPIParameter `json:"parameters"`
}

// openAPIParameter is a parameter or a reference to one.
type openAPIParameter struct {
	Ref    string `json:"$ref"`
	Name   string `json:"name"`
	In     string `json:"in"`
	Schema struct {
		Enum     []string `json:"enum"`
		Examples []string `json:"examples"`
	} `json:"schema"`
}

var fiberParam = regexp.MustCompile(`:([a-z]+)`)

// documentedRoutes expands the document into "METHOD path" → access, with
// the /assets/{file} template expanded into its enumerated files.
func documentedRoutes(t *testing.T) map[string]string {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("api.OpenAPI is not JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	out := map[string]string{}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			var op openAPIOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			paths := []string{path}
			if strings.Contains(path, "{file}") {
				paths = nil
				for _, p := range op.Parameters {
					if name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
						p = doc.Components.Parameters[name]
					}
					if p.Name == "file" {
						for _, f := range p.Schema.Enum {
							paths = append(paths, strings.Replace(path, "{file}", f, 1))
						}
					}
				}
			}
			for _, p := range paths {
				out[strings.ToUpper(method)+" "+p] = op.Access
			}
		}
	}
	return out
}

// TestOpenAPIMatchesRoutes checks the OpenAPI document against the route
// table both ways: every registered route is documented with its access
// rule, and every documented operation is registered.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	documented := documentedRoutes(t)
	registered := map[string]bool{}
	for _, r := range srv.API.Routes() {
		id := r.Method + " " + fiberParam.ReplaceAllString(r.Path, "{$1}")
		registered[id] = true
		access, ok := documented[id]
		switch {
		case !ok:
			t.Errorf("route %s is not in api/openapi.json", id)
		case access != r.Access.String():
			t.Errorf("route %s: the document says access %q, the route table %q", id, access, r.Access)
		}
	}
	for id := range documented {
		if !registered[id] {
			t.Errorf("api/openapi.json documents %s, which the server does not serve", id)
		}
	}
	resp := srv.Do(http.MethodGet, srv.URL+"/v1/openapi.json", nil)
	if body := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusOK || string(body) != string(api.OpenAPI) {
		t.Errorf("GET /v1/openapi.json = %d, %d bytes; want 200 and the document", resp.StatusCode, len(body))
	}
}

// TestOpenAPIErrorCodes checks that every error code the server's source
// can return (Errorf, &Error{Code: ...}, the sentinels table) is listed in
// some response's x-error-codes.
func TestOpenAPIErrorCodes(t *testing.T) {
	var doc any
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "x-error-codes" {
					for _, c := range x.([]any) {
						documented[c.(string)] = true
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	used := sourceErrorCodes(t)
	if len(used) < 30 {
		t.Fatalf("found only %d error codes in the source: the scan is broken", len(used))
	}
	var missing []string
	for c := range used {
		if !documented[c] {
			missing = append(missing, c)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("error codes the server returns but api/openapi.json does not list: %v", missing)
	}
}

// sourceErrorCodes collects the snake_case error codes in api/*.go.
func sourceErrorCodes(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]bool{}
	snake := regexp.MustCompile(`^[a-z]+(_[a-z]+)+$|^[a-z]+$`)
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		add := func(e ast.Expr) {
			if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && snake.MatchString(s) {
					codes[s] = true
				}
			}
		}
		ast.Inspect(af, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr: // Errorf(status, "code", ...)
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "Errorf" && len(n.Args) > 1 {
					add(n.Args[1])
				}
			case *ast.KeyValueExpr: // Error{Code: "code"}, ErrorObject{Code: ...}, sentinels {code: ...}
				if id, ok := n.Key.(*ast.Ident); ok && (id.Name == "Code" || id.Name == "code") {
					add(n.Value)
				}
			case *ast.CompositeLit: // the sentinels table: {err, http.StatusX, "code"}
				if len(n.Elts) == 3 {
					if sel, ok := n.Elts[1].(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Status") {
						add(n.Elts[2])
					}
				}
			}
			return true
		})
	}
	return codes
}

// documentedCodes returns the error codes api/openapi.json lists for
// method path's status response (following a $ref into components).
func documentedCodes(t *testing.T, method, path, status string) []string {
	t.Helper()
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var op struct {
		Responses map[string]json.RawMessage `json:"responses"`
	}
	if err := json.Unmarshal(doc.Paths[path][strings.ToLower(method)], &op); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	var resp struct {
		Ref   string   `json:"$ref"`
		Codes []string `json:"x-error-codes"`
	}
	if err := json.Unmarshal(op.Responses[status], &resp); err != nil {
		t.Fatalf("%s %s %s: %v", method, path, status, err)
	}
	if name, ok := strings.CutPrefix(resp.Ref, "#/components/responses/"); ok {
		if err := json.Unmarshal(doc.Components.Responses[name], &resp); err != nil {
			t.Fatal(err)
		}
	}
	return resp.Codes
}

// TestOpenAPIHeaderErrorsEveryNamespaceRoute sends an invalid cachesvc
// header to every route in a namespace (each checks them, README: "Checked
// on every route in a namespace") and checks that the 400 and its code are
// in that operation's documented responses.
func TestOpenAPIHeaderErrorsEveryNamespaceRoute(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	fill := strings.NewReplacer(":ns", "default", ":key", strings.Repeat("ab", 32), ":run", "r1")
	n := 0
	for _, r := range srv.API.Routes() {
		if !strings.Contains(r.Path, ":ns") {
			continue
		}
		n++
		path := fiberParam.ReplaceAllString(r.Path, "{$1}")
		for _, h := range [][2]string{{"X-Cachesvc-Run", "not a run!"}, {"X-Cachesvc-Backend", "NOT-A-BACKEND"}, {"X-Content-SHA256", "zz"}} {
			resp := srv.Do(r.Method, srv.URL+fill.Replace(r.Path), strings.NewReader("{}"), h[0], h[1])
			var body struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if r.Method != http.MethodHead {
				if err := json.Unmarshal(apitest.ReadAll(t, resp), &body); err != nil {
					t.Errorf("%s %s with %s: %d, body not JSON: %v", r.Method, path, h[0], resp.StatusCode, err)
					continue
				}
			} else {
				apitest.ReadAll(t, resp)
				body.Error.Code = resp.Header.Get(wire.HeaderError) // HEAD has no body
			}
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s %s with %s: %q = %d, want 400", r.Method, path, h[0], h[1], resp.StatusCode)
				continue
			}
			codes := documentedCodes(t, r.Method, path, "400")
			if !slices.Contains(codes, body.Error.Code) {
				t.Errorf("%s %s with %s: code %q, which api/openapi.json does not list for its 400 (%v)", r.Method, path, h[0], body.Error.Code, codes)
			}
		}
	}
	if n < 15 {
		t.Fatalf("only %d routes in a namespace", n)
	}
}

// TestOpenAPIWaitExamplesAccepted sends each documented example of ?wait=
// and ?waited= (waited=0 included: the first slice of a client's wait after
// its miss) to a real server: none is refused. With no lease the wait
// answers at once, 404 not_found; a waited one counts no miss, a bare
// wait one.
func TestOpenAPIWaitExamplesAccepted(t *testing.T) {
	var doc openAPIDoc
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	srv := statstest.Start(t, nil)
	tests := []struct {
		param, query string // query: the request's query with %s for the example
		misses       int64  // the misses it counts
	}{
		{"Wait", "?wait=%s", 1},
		{"Waited", "?wait=0.1s&waited=%s", 0},
	}
	for _, tt := range tests {
		examples := doc.Components.Parameters[tt.param].Schema.Examples
		if len(examples) == 0 {
			t.Fatalf("components.parameters.%s has no examples", tt.param)
		}
		if tt.param == "Waited" && !slices.Contains(examples, "0") {
			t.Errorf("waited's examples %v lack 0, the first slice's value", examples)
		}
		for i, ex := range examples {
			t.Run(tt.param+"="+ex, func(t *testing.T) {
				entry := srv.URL + "/v1/default/entries/" + strings.Repeat(strconv.Itoa(i), 64)
				before := getStats(t, srv.URL+"/v1/stats").Totals
				resp := srv.Do(http.MethodGet, entry+strings.Replace(tt.query, "%s", ex, 1), nil)
				body := apitest.ReadAll(t, resp)
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("%s=%s: %d %s, want 404 not_found", tt.param, ex, resp.StatusCode, body)
				}
				if got := getStats(t, srv.URL+"/v1/stats").Totals.Misses - before.Misses; got != tt.misses {
					t.Errorf("%s=%s counted %d misses, want %d", tt.param, ex, got, tt.misses)
				}
			})
		}
	}
}
