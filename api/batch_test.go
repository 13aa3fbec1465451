package api_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/store/storetest"
	"github.com/cachesvc/cachesvc/wire"
)

// testKey returns a deterministic key for i.
func testKey(i int) string {
	s := sha256.Sum256([]byte(fmt.Sprintf("key-%d", i)))
	return hex.EncodeToString(s[:])
}

func newClient(t *testing.T, url, run string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: url, Run: run})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func putEntry(t *testing.T, c *client.Client, ns, key string, body []byte, name string) {
	t.Helper()
	sum := sha256.Sum256(body)
	if _, err := c.Put(context.Background(), ns, key, bytes.NewReader(body), client.PutOptions{
		Size: int64(len(body)), SHA256: sum[:], Name: name, CompileSeconds: 1.5, Backend: "passthrough",
	}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func TestBatchAndExists(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	ctx := context.Background()
	bodies := map[string][]byte{}
	for i := 0; i < 5; i++ {
		b := bytes.Repeat([]byte{byte(i)}, 1000*(i+1)+7)
		bodies[testKey(i)] = b
		putEntry(t, c, "default", testKey(i), b, fmt.Sprintf("jit_f%d", i))
	}
	keys := []string{testKey(0), testKey(100), testKey(3), testKey(0), testKey(4), testKey(101)}
	var got []string
	missing, err := c.Batch(ctx, "default", keys, func(m client.Member, r io.Reader) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if !bytes.Equal(data, bodies[m.Key]) {
			return fmt.Errorf("member %s: wrong bytes", m.Key)
		}
		sum := sha256.Sum256(data)
		if m.SHA256 != hex.EncodeToString(sum[:]) || m.CompileSeconds != 1.5 || m.Backend != "passthrough" || !strings.HasPrefix(m.Name, "jit_f") {
			return fmt.Errorf("member %s: PAX records %+v", m.Key, m)
		}
		got = append(got, m.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{testKey(0), testKey(3), testKey(4)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("members = %v, want %v (request order, duplicates dropped)", got, want)
	}
	if want := []string{testKey(100), testKey(101)}; fmt.Sprint(missing) != fmt.Sprint(want) {
		t.Errorf("missing = %v, want %v", missing, want)
	}

	present, absent, err := c.Exists(ctx, "default", keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(present) != 3 || len(absent) != 2 || present[1] != testKey(3) {
		t.Errorf("exists = %v / %v", present, absent)
	}
}

// TestBatchStreamIsPlainTar reads a batch with nothing but archive/tar.
func TestBatchStreamIsPlainTar(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	putEntry(t, c, "ns1", testKey(1), []byte("hello"), "jit_g-x")
	resp, err := http.Post(srv.URL+"/v1/ns1/batch", "application/json", strings.NewReader(`{"keys":["`+testKey(1)+`","`+testKey(2)+`"]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-tar" {
		t.Errorf("content type %q", ct)
	}
	tr := tar.NewReader(resp.Body)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		data, _ := io.ReadAll(tr)
		if h.Name == wire.MissingMember && !strings.Contains(string(data), testKey(2)) {
			t.Errorf("missing.json = %s", data)
		}
		if h.Name == testKey(1) && (string(data) != "hello" || h.PAXRecords[wire.PAXName] != "jit_g-x") {
			t.Errorf("member = %q %v", data, h.PAXRecords)
		}
	}
	if len(names) != 2 || names[1] != wire.MissingMember {
		t.Errorf("members = %v", names)
	}
}

func TestBatchBadInput(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	tooMany := make([]string, wire.MaxBatchKeys+1)
	for i := range tooMany {
		tooMany[i] = testKey(i)
	}
	big, _ := json.Marshal(map[string]any{"keys": tooMany})
	tests := []struct {
		name, path, body string
		status           int
		code, contains   string
	}{
		{"over limit", "/v1/default/batch", string(big), 413, "too_many_keys", "10001"},
		{"exists over limit", "/v1/default/exists", string(big), 413, "too_many_keys", "limit is 10000"},
		{"bad key named by index", "/v1/default/batch", `{"keys":["` + testKey(1) + `","nothex"]}`, 400, "bad_key", "Keys[1]"},
		{"uppercase key", "/v1/default/exists", `{"keys":["` + strings.ToUpper(testKey(1)) + `"]}`, 400, "bad_key", "keys[0]"},
		{"empty", "/v1/default/batch", `{"keys":[]}`, 400, "no_keys", "1 to 10000"},
		{"not json", "/v1/default/batch", `keys`, 400, "bad_json", ""},
		{"unknown field", "/v1/default/batch", `{"key":["a"]}`, 400, "bad_json", "unknown field"},
		{"bad namespace", "/v1/Bad!/batch", `{"keys":["` + testKey(1) + `"]}`, 400, "bad_namespace", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			checkError(t, resp, tt.status, tt.code, tt.contains)
		})
	}
}

// checkError asserts a JSON error response.
func checkError(t *testing.T, resp *http.Response, status int, code, contains string) {
	t.Helper()
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatalf("status %d, body %q: %v", resp.StatusCode, data, err)
	}
	if resp.StatusCode != status || body.Error.Code != code || !strings.Contains(strings.ToLower(body.Error.Message), strings.ToLower(contains)) {
		t.Errorf("got %d %s %q, want %d %s containing %q", resp.StatusCode, body.Error.Code, body.Error.Message, status, code, contains)
	}
}

func TestRunManifest(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	c := newClient(t, srv.URL, "sweep-1.arm-a")
	putEntry(t, c, "default", testKey(1), []byte("one"), "jit_one-"+testKey(1))
	if _, err := c.Get(ctx, "default", testKey(2), 0); !client.IsNotFound(err) {
		t.Fatalf("get miss: %v", err)
	}
	// A lookup by another run of an entry written without a run.
	putEntry(t, newClient(t, srv.URL, ""), "default", testKey(3), []byte("three"), "jit_three-"+testKey(3))
	resp, err := c.Get(ctx, "default", testKey(3), 0)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := c.Batch(ctx, "default", []string{testKey(1), testKey(4)}, func(client.Member, io.Reader) error { return nil }); err != nil {
		t.Fatal(err)
	}

	m, err := c.Manifest(ctx, "default", "sweep-1.arm-a")
	if err != nil {
		t.Fatal(err)
	}
	want := []client.KeyRecord{
		{Key: testKey(1), Name: "jit_one-" + testKey(1), LookedUp: true, Written: true},
		{Key: testKey(2), LookedUp: true},
		{Key: testKey(3), Name: "jit_three-" + testKey(3), LookedUp: true},
		{Key: testKey(4), LookedUp: true},
	}
	if fmt.Sprint(m.Keys) != fmt.Sprint(want) || m.Truncated {
		t.Errorf("manifest keys = %+v\nwant %+v", m.Keys, want)
	}

	// Unknown run, wrong namespace, bad run id.
	for _, tc := range []struct {
		path, code string
		status     int
	}{
		{"/v1/default/runs/nope/manifest", "unknown_run", 404},
		{"/v1/other/runs/sweep-1.arm-a/manifest", "unknown_run", 404},
		{"/v1/default/runs/-bad/manifest", "bad_run", 400},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		checkError(t, resp, tc.status, tc.code, "")
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/default/entries/"+testKey(1), nil)
	req.Header.Set("X-Cachesvc-Run", "has space")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	checkError(t, resp, 400, "bad_run", "X-Cachesvc-Run")
}

func TestLeaseBadInput(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	putEntry(t, c, "default", testKey(9), []byte("x"), "")
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"bad key", "POST", "/v1/default/leases/xyz", `{"holder":"h","ttl_s":5}`, 400, "bad_key"},
		{"no holder", "POST", "/v1/default/leases/" + testKey(1), `{"ttl_s":5}`, 400, "bad_holder"},
		{"negative ttl", "POST", "/v1/default/leases/" + testKey(1), `{"holder":"h","ttl_s":-1}`, 400, "bad_ttl"},
		{"huge ttl", "POST", "/v1/default/leases/" + testKey(1), `{"holder":"h","ttl_s":1e9}`, 400, "bad_ttl"},
		{"bad json", "POST", "/v1/default/leases/" + testKey(1), `{"holder":`, 400, "bad_json"},
		{"entry exists", "POST", "/v1/default/leases/" + testKey(9), `{"holder":"h","ttl_s":5}`, 409, "entry_exists"},
		{"release unknown", "DELETE", "/v1/default/leases/" + testKey(1) + "?holder=h", ``, 404, "lease_not_found"},
		{"release no holder", "DELETE", "/v1/default/leases/" + testKey(1), ``, 400, "bad_holder"},
		{"bad wait", "GET", "/v1/default/entries/" + testKey(1) + "?wait=forever", ``, 400, "bad_wait"},
		{"wait too long", "GET", "/v1/default/entries/" + testKey(1) + "?wait=301s", ``, 400, "bad_wait"},
		{"wait without lease", "GET", "/v1/default/entries/" + testKey(1) + "?wait=60s", ``, 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			checkError(t, resp, tt.status, tt.code, "")
		})
	}
	// Held by another holder: 409 with holder and expiry at the top level.
	if _, ok, err := c.AcquireLease(context.Background(), "default", testKey(1), "a", 0); err == nil || ok {
		// ttl 0 is rejected (must be above 0)
		t.Fatalf("ttl 0: ok=%v err=%v", ok, err)
	}
	l, ok, err := c.AcquireLease(context.Background(), "default", testKey(1), "a", 30e9)
	if err != nil || !ok || l.Holder != "a" {
		t.Fatalf("acquire: %+v %v %v", l, ok, err)
	}
	l2, ok, err := c.AcquireLease(context.Background(), "default", testKey(1), "b", 30e9)
	if err != nil || ok || l2.Holder != "a" || !l2.Expires.Equal(l.Expires) {
		t.Fatalf("second acquire: %+v %v %v", l2, ok, err)
	}
	// The holder renews by posting again.
	time.Sleep(10 * time.Millisecond)
	l3, ok, err := c.RenewLease(context.Background(), "default", testKey(1), "a", 60e9)
	if err != nil || !ok || !l3.Expires.After(l.Expires) {
		t.Fatalf("renewal: %+v %v %v (was %+v)", l3, ok, err, l)
	}
	var ce *client.Error
	if err := c.ReleaseLease(context.Background(), "default", testKey(1), "b"); !errors.As(err, &ce) || ce.Status != 409 {
		t.Fatalf("release by other: %v", err)
	}
	if err := c.ReleaseLease(context.Background(), "default", testKey(1), "a"); err != nil {
		t.Fatal(err)
	}
}

// TestBatchCorruptEntryAbortsStream: a chunk that fails its checksum in the
// middle of a member aborts the stream; the client never gets a complete
// wrong member nor a missing.json that would claim completeness.
func TestBatchCorruptEntryAbortsStream(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	bad := make([]byte, 3<<20)
	rand.New(rand.NewSource(12)).Read(bad)
	putEntry(t, c, "default", testKey(1), []byte("good one"), "")
	putEntry(t, c, "default", testKey(2), bad, "")
	putEntry(t, c, "default", testKey(3), []byte("good three"), "")
	srv.Close()
	if _, err := storetest.FlipInValueLog(srv.Dir, bad[2<<20+100:2<<20+164]); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	c = newClient(t, srv.URL, "")
	var got []string
	missing, err := c.Batch(context.Background(), "default", []string{testKey(1), testKey(2), testKey(3)}, func(m client.Member, r io.Reader) error {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return err
		}
		got = append(got, m.Key)
		return nil
	})
	if err == nil {
		t.Fatalf("batch over a corrupt entry completed: members %v, missing %v", got, missing)
	}
	if len(got) != 1 || got[0] != testKey(1) {
		t.Errorf("members delivered before the abort = %v, want only the first", got)
	}
	t.Logf("batch over a corrupt entry failed as it must: %v", err)
	// The entry is quarantined: a new batch reports it missing.
	missing, err = c.Batch(context.Background(), "default", []string{testKey(2), testKey(3)}, func(client.Member, io.Reader) error { return nil })
	if err != nil || len(missing) != 1 || missing[0] != testKey(2) {
		t.Fatalf("after quarantine: missing %v, err %v", missing, err)
	}
}

// TestRunManifestSurvivesRestart: with Config.Runs.Path set, manifests are
// saved at shutdown and loaded at start.
func TestRunManifestSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.json")
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Runs.Path = path }})
	putEntry(t, newClient(t, srv.URL, "persisted-run"), "default", testKey(7), []byte("seven"), "jit_seven")
	srv.Restart()
	m, err := newClient(t, srv.URL, "").Manifest(context.Background(), "default", "persisted-run")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Keys) != 1 || m.Keys[0].Key != testKey(7) || !m.Keys[0].Written || m.Keys[0].Name != "jit_seven" {
		t.Fatalf("manifest after restart: %+v", m)
	}
}
