package state

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
)

// keyer returns a replica's Keyer over the built-in plugins with the
// bucket's shared memo.
func keyer(t *testing.T, c *Client) *keying.Keyer {
	k := keyingtest.Keyer(t, plugins.Config{}, keying.Config{SharedMemo: c.Memo(), SharedMemoTimeout: time.Second})
	t.Cleanup(func() { k.Close(ctx) })
	return k
}

// drain waits until k's shared memo writer has stored n results.
func drain(t *testing.T, k *keying.Keyer, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for k.SharedMemoStats().Written < n {
		if time.Now().After(deadline) {
			t.Fatalf("shared memo writes: %+v, want %d written", k.SharedMemoStats(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFleetMemo(t *testing.T) {
	c, srv := bucket(t)
	a, b := keyer(t, c), keyer(t, client(t, srv, c.Bucket()))
	sigs := make([][]byte, 5)
	for i := range sigs {
		sigs[i] = fmt.Appendf(nil, `{"backend":"passthrough","kind":"jax","key":"jit_step_%d"}`, i)
	}
	want := make([]keying.Result, len(sigs))
	for i, sig := range sigs {
		res, err := a.Key(ctx, sig)
		if err != nil || res.Memo {
			t.Fatalf("replica a: %+v %v; want a plugin call", res, err)
		}
		want[i] = res
	}
	drain(t, a, uint64(len(sigs)))
	pluginCalls := 0
	for i, sig := range sigs {
		res, err := b.Key(ctx, sig)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Memo {
			pluginCalls++
		}
		if res.Key != want[i].Key || res.Plugin != want[i].Plugin || res.DisplayName != want[i].DisplayName {
			t.Fatalf("replica b result %d = %+v, want %+v", i, res, want[i])
		}
	}
	if st := b.SharedMemoStats(); pluginCalls != 0 || st.Hits != uint64(len(sigs)) {
		t.Fatalf("replica b called plugins %d times, shared memo %+v; want 0 calls, %d hits", pluginCalls, st, len(sigs))
	}
	// Digest-first: a third replica finds the result by the digest alone.
	d := keyer(t, client(t, srv, c.Bucket()))
	for _, backend := range []string{"passthrough", ""} {
		res, ok := d.LookupDigest(ctx, sha256.Sum256(sigs[0]), backend)
		if !ok || res.Key != want[0].Key {
			t.Fatalf("LookupDigest(backend %q) = %+v, %v; want key %s", backend, res, ok, want[0].Key)
		}
		if _, ok := d.Recall(res.Key); !ok {
			t.Fatal("a digest hit is not recalled for the PUT that follows")
		}
	}
	if _, ok := d.LookupDigest(ctx, sha256.Sum256([]byte("unknown")), ""); ok {
		t.Fatal("unknown digest found")
	}
}

func TestFleetMemoCorrupt(t *testing.T) {
	c, srv := bucket(t)
	a := keyer(t, c)
	sig := []byte(`{"backend":"passthrough","kind":"jax","key":"jit_f"}`)
	digest := sha256.Sum256(sig)
	want, err := a.Key(ctx, sig)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, a, 1)
	tests := []struct{ name, value string }{
		{"not JSON", `{"v":2,`},
		{"another plugin", fmt.Sprintf(`{"v":2,"key":%q,"plugin":"passthrough@0.9.0","code":%q,"backend":"passthrough","components":{}}`, want.Key, want.PluginSHA256)},
		{"other code", fmt.Sprintf(`{"v":2,"key":%q,"plugin":"passthrough@1.0.0","code":%q,"backend":"passthrough","components":{}}`, want.Key, strings.Repeat("0", 64))},
		{"format 1", fmt.Sprintf(`{"v":1,"key":%q,"plugin":"passthrough@1.0.0","backend":"passthrough","components":{}}`, want.Key)},
		{"bad key", fmt.Sprintf(`{"v":2,"key":"zz","plugin":"passthrough@1.0.0","code":%q,"backend":"passthrough","components":{}}`, want.PluginSHA256)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := c.Prefix() + "memo/" + want.Plugin + "/" + want.PluginSHA256 + "/" + fmt.Sprintf("%x", digest)
			if err := os.WriteFile(srv.ObjectPath(c.Bucket(), obj), []byte(tt.value), 0o644); err != nil {
				t.Fatal(err)
			}
			b := keyer(t, client(t, srv, c.Bucket()))
			res, err := b.Key(ctx, sig)
			if err != nil || res.Memo || res.Key != want.Key {
				t.Fatalf("over a corrupt value: %+v %v; want a fresh plugin call with key %s", res, err, want.Key)
			}
			if st := b.SharedMemoStats(); st.Corrupt != 1 {
				t.Fatalf("stats %+v, want 1 corrupt", st)
			}
			drain(t, b, 1) // overwritten with the good value
			fresh := keyer(t, client(t, srv, c.Bucket()))
			if res, _ := fresh.Key(ctx, sig); !res.Memo {
				t.Fatalf("case %d: the corrupt value was not replaced", i)
			}
		})
	}
}

// TestFleetMemoKeepsNewerFormat: during a rolling upgrade, a replica that
// finds a memo value of a newer record format than it reads (a newer
// replica's) computes the key itself but leaves the value as it is, where
// it used to overwrite it with its own format, so that every newer replica
// then missed on it too and overwrote it back.
func TestFleetMemoKeepsNewerFormat(t *testing.T) {
	c, srv := bucket(t)
	a := keyer(t, c)
	sig := []byte(`{"backend":"passthrough","kind":"jax","key":"jit_newer"}`)
	want, err := a.Key(ctx, sig)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, a, 1)
	obj := c.Prefix() + "memo/" + want.Plugin + "/" + want.PluginSHA256 + "/" + fmt.Sprintf("%x", sha256.Sum256(sig))
	newer := fmt.Sprintf(`{"v":99,"key":%q,"plugin":"passthrough@1.0.0","code":%q,"backend":"passthrough","components":{},"added":"by a newer build"}`,
		want.Key, want.PluginSHA256)
	if err := os.WriteFile(srv.ObjectPath(c.Bucket(), obj), []byte(newer), 0o644); err != nil {
		t.Fatal(err)
	}
	b := keyer(t, client(t, srv, c.Bucket()))
	if res, err := b.Key(ctx, sig); err != nil || res.Memo || res.Key != want.Key {
		t.Fatalf("over a newer value: %+v %v; want a plugin call with key %s", res, err, want.Key)
	}
	drain(t, b, 1)
	got, err := os.ReadFile(srv.ObjectPath(c.Bucket(), obj))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != newer {
		t.Errorf("memo value after an older replica computed it: %s; want the newer replica's kept: %s", got, newer)
	}
}

func TestFleetMemoS3Down(t *testing.T) {
	c, srv := bucket(t)
	k := keyingtest.Keyer(t, plugins.Config{}, keying.Config{SharedMemo: c.Memo(), SharedMemoTimeout: 500 * time.Millisecond, SharedMemoQueue: 2})
	srv.Stop()
	for i := range 6 {
		start := time.Now()
		res, err := k.Key(ctx, fmt.Appendf(nil, `{"backend":"passthrough","kind":"jax","key":"k%d"}`, i))
		if err != nil || res.Memo {
			t.Fatalf("keying with S3 down: %+v %v", res, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("keying with S3 down took %v", d)
		}
	}
	if err := k.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := k.SharedMemoStats(); st.Errors == 0 || st.Written != 0 || st.Dropped+st.Errors < 6 {
		t.Fatalf("stats with S3 down: %+v", st)
	}
}
