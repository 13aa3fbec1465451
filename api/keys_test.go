package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/wire"
)

// startKeyServer starts a server whose keyer runs the built-ins and the test
// plugins of plugins/testdata (including the faulty ones).
func startKeyServer(t *testing.T, hcfg plugins.Config, kcfg keying.Config) *apitest.Server {
	t.Helper()
	var files []string
	for _, n := range []string{"empty", "faults", "nondet"} {
		files = append(files, filepath.Join("..", "plugins", "testdata", n+".wasm"))
	}
	k := keyingtest.Keyer(t, hcfg, kcfg, files...)
	return apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Keyer = k }})
}

type errBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func post(t *testing.T, s *apitest.Server, path string, body []byte, headers ...string) (*http.Response, []byte) {
	t.Helper()
	resp := s.Do(http.MethodPost, s.URL+path, bytes.NewReader(body), headers...)
	return resp, apitest.ReadAll(t, resp)
}

func TestKeysErrors(t *testing.T) {
	s := startKeyServer(t, plugins.Config{CallTimeout: 5 * time.Second, MaxMemoryBytes: 32 << 20},
		keying.Config{MaxSignatureBytes: 1 << 20})
	tests := []struct {
		name   string
		path   string
		body   string
		status int
		code   string
		text   string
	}{
		{"malformed", "/v1/default/keys", `{"backend":`, 400, "malformed_signature", "not valid JSON"},
		{"not an object", "/v1/default/keys", `"xla"`, 400, "malformed_signature", "JSON object"},
		{"no backend", "/v1/default/keys", `{}`, 400, "malformed_signature", `no "backend"`},
		{"bad namespace", "/v1/Bad!/keys", `{}`, 400, "bad_namespace", ""},
		{"unknown backend", "/v1/default/keys", `{"backend":"cobol"}`, 422, "unknown_backend", "known backends: empty, faults, nondet, passthrough, pt2, xla"},
		{"plugin error", "/v1/default/keys", `{"backend":"passthrough","kind":"jax"}`, 422, "plugin_error", "field key is required"},
		{"plugin error on lookup", "/v1/default/lookup", `{"backend":"faults","mode":"error"}`, 422, "plugin_error", "rejected on purpose"},
		{"too large", "/v1/default/keys", `{"backend":"empty","x":"` + strings.Repeat("x", 1<<20) + `"}`, 413, "signature_too_large", "limit is 1048576 bytes"},
		{"plugin loops", "/v1/default/keys", `{"backend":"faults","mode":"loop"}`, 422, "plugin_failed", "did not finish within 5s"},
		{"plugin grows", "/v1/default/keys", `{"backend":"faults","mode":"grow"}`, 422, "plugin_failed", "memory limit of 32 MiB"},
		{"plugin traps", "/v1/default/lookup", `{"backend":"faults","mode":"trap"}`, 422, "plugin_failed", "deliberate panic"},
		{"plugin 100 MB output", "/v1/default/keys", `{"backend":"faults","mode":"big"}`, 422, "plugin_failed", "memory"},
		// A signature is its plugin's document, outside the server's
		// unknown-field policy (fieldpolicy.go): a field ignored there
		// would give two different compilations one key, so the built-ins
		// refuse one they do not know, whatever ?field_validation says.
		{"unknown signature field", "/v1/default/keys", `{"backend":"passthrough","kind":"jax","key":"k","priority":1}`, 422, "plugin_error", `unknown field "priority"`},
		{"unknown signature field, warn", "/v1/default/lookup?field_validation=warn", `{"backend":"passthrough","kind":"jax","key":"k","priority":1}`, 422, "plugin_error", `unknown field "priority"`},
		{"unknown xla signature field", "/v1/default/keys", `{"backend":"xla","priority":1}`, 422, "plugin_error", `unknown field "priority"`},
		{"unknown pt2 signature field", "/v1/default/keys", `{"backend":"pt2","priority":"1"}`, 422, "plugin_error", `unknown field "priority"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := post(t, s, tt.path, []byte(tt.body))
			var e errBody
			_ = json.Unmarshal(b, &e)
			if resp.StatusCode != tt.status || e.Error.Code != tt.code || !strings.Contains(e.Error.Message, tt.text) {
				t.Fatalf("%d %s; want %d %s containing %q", resp.StatusCode, b, tt.status, tt.code, tt.text)
			}
		})
	}
}

// TestPluginFaultsKeepServerAnswering runs every fault at once, each
// repeatedly, while passthrough keys keep being served correctly.
func TestPluginFaultsKeepServerAnswering(t *testing.T) {
	s := startKeyServer(t, plugins.Config{CallTimeout: 2 * time.Second, MaxMemoryBytes: 64 << 20, PoolSize: 2, AcquireTimeout: time.Minute},
		keying.Config{MemoEntries: -1})
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for _, mode := range []string{"loop", "grow", "trap", "exit", "big"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2; i++ {
				resp, b := post(t, s, "/v1/default/keys", []byte(`{"backend":"faults","mode":"`+mode+`","i":`+fmt.Sprint(i)+`}`))
				if resp.StatusCode != http.StatusUnprocessableEntity || !bytes.Contains(b, []byte("plugin_failed")) {
					errs <- fmt.Sprintf("%s: %d %s", mode, resp.StatusCode, b)
				}
			}
		}()
	}
	stop := make(chan struct{})
	served := 0
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				close(errs)
				return
			default:
			}
			resp, b := post(t, s, "/v1/default/keys", []byte(fmt.Sprintf(`{"backend":"passthrough","kind":"jax","key":"k%d"}`, i)))
			var k wire.KeyResponse
			if resp.StatusCode != 200 || json.Unmarshal(b, &k) != nil || k.Key != keying.ComputeKey("passthrough@1.0.0", "passthrough", []byte(fmt.Sprintf("jax\x00k%d", i))).String() {
				errs <- fmt.Sprintf("passthrough during faults: %d %s", resp.StatusCode, b)
			}
			served++
		}
	}()
	wg.Wait()
	close(stop)
	for e := range errs {
		t.Error(e)
	}
	if served == 0 {
		t.Error("no passthrough request completed during the faults")
	}
	if resp := s.Do(http.MethodGet, s.URL+"/healthz", nil); resp.StatusCode != 200 {
		t.Errorf("healthz %d", resp.StatusCode)
	}
}

func TestKeysLookupPutRoundTrip(t *testing.T) {
	s := startKeyServer(t, plugins.Config{}, keying.Config{})
	sig := []byte(`{"backend":"passthrough","kind":"jax","key":"jit_f-0a1b"}`)
	want := keying.ComputeKey("passthrough@1.0.0", "passthrough", []byte("jax\x00jit_f-0a1b")).String()

	resp, b := post(t, s, "/v1/default/keys", sig)
	var kr wire.KeyResponse
	if resp.StatusCode != 200 || json.Unmarshal(b, &kr) != nil || kr.Key != want || kr.Plugin != "passthrough@1.0.0" ||
		kr.DisplayName != "jit_f-0a1b" || kr.Components["kind"] != "jax" {
		t.Fatalf("keys: %d %s", resp.StatusCode, b)
	}

	// Miss: 404 with the key, its components and an explanation.
	resp, b = post(t, s, "/v1/team-a/lookup", sig)
	var miss wire.LookupMiss
	if resp.StatusCode != 404 || json.Unmarshal(b, &miss) != nil || miss.Key != want || miss.Error.Code != "not_found" ||
		miss.Components["kind"] != "jax" || resp.Header.Get(wire.HeaderKey) != want {
		t.Fatalf("lookup miss: %d %s", resp.StatusCode, b)
	}
	if miss.Explanation.Reason == "" && miss.Explanation.Summary == "" {
		t.Errorf("miss has no explanation: %s", b)
	}

	// PUT with just the key: the components of the lookup are stored.
	exe := bytes.Repeat([]byte("executable"), 5000)
	resp = s.Do(http.MethodPut, s.EntryURL("team-a", want), bytes.NewReader(exe))
	if resp.StatusCode != 201 {
		t.Fatalf("put: %d %s", resp.StatusCode, apitest.ReadAll(t, resp))
	}
	resp.Body.Close()
	key, _ := cachekey.ParseKey(want)
	m, err := s.Store.Stat(context.Background(), "team-a", key)
	if err != nil || m.Components["kind"] != "jax" || m.Backend != "passthrough" || m.Name != "jit_f-0a1b" {
		t.Fatalf("stored meta %+v %v", m, err)
	}

	// Hit: the executable, streamed, with the key header.
	resp = s.Do(http.MethodPost, s.URL+"/v1/team-a/lookup", bytes.NewReader(sig))
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, exe) || resp.Header.Get(wire.HeaderKey) != want ||
		resp.Header.Get("Content-Length") != fmt.Sprint(len(exe)) {
		t.Fatalf("lookup hit: %d %d bytes %v", resp.StatusCode, len(got), resp.Header)
	}
	// Namespaces are separate.
	if resp, _ := post(t, s, "/v1/default/lookup", sig); resp.StatusCode != 404 {
		t.Fatalf("other namespace: %d", resp.StatusCode)
	}
}

func TestKeysConcurrentIdentical(t *testing.T) {
	s := startKeyServer(t, plugins.Config{PoolSize: 2}, keying.Config{})
	var wg sync.WaitGroup
	keys := make([]string, 24)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, b := post(t, s, "/v1/default/keys", []byte(`{"backend":"nondet","same":true}`))
			var kr wire.KeyResponse
			_ = json.Unmarshal(b, &kr)
			keys[i] = kr.Key
		}()
	}
	wg.Wait()
	for i := range keys {
		if keys[i] == "" || keys[i] != keys[0] {
			t.Fatalf("caller %d got %q, caller 0 %q", i, keys[i], keys[0])
		}
	}
}

func TestKeysDisabled(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	resp, b := post(t, s, "/v1/default/keys", []byte(`{"backend":"xla"}`))
	if resp.StatusCode != http.StatusNotImplemented || !bytes.Contains(b, []byte("keying_disabled")) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
