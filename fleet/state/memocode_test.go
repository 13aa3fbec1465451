package state

import (
	"crypto/sha256"
	"path/filepath"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
)

// codeKeyer returns a replica's Keyer over the built-ins and the test
// plugin build name (plugins/testdata/<name>.wasm) with the bucket's
// shared memo.
func codeKeyer(t *testing.T, c *Client, name string) *keying.Keyer {
	file := filepath.Join("..", "..", "plugins", "testdata", name+".wasm")
	k := keyingtest.Keyer(t, plugins.Config{}, keying.Config{SharedMemo: c.Memo(), SharedMemoTimeout: time.Second}, file)
	t.Cleanup(func() { k.Close(ctx) })
	return k
}

// TestFleetMemoTwoCodes: during a rolling upgrade two replicas run
// different files of one name@version (empty and emptyfix are both
// empty@1 and key differently). Each keys with its own code and never
// takes the other's result from the shared memo, while replicas of the
// same code still share theirs.
func TestFleetMemoTwoCodes(t *testing.T) {
	c, srv := bucket(t)
	sig := []byte(`{"backend":"empty","program":"train_step"}`)
	wantKey := map[string]string{
		"empty":    keying.ComputeKey("empty@1", "empty", sig).String(),
		"emptyfix": keying.ComputeKey("empty@1", "empty", append([]byte("fixed:"), sig...)).String(),
	}
	// Replicas in order of their first lookup of sig: the first of each
	// code calls its plugin and shares the result, the second of each code
	// takes it from the shared memo.
	tests := []struct {
		replica, code string
		wantMemo      bool
	}{
		{"old-1", "empty", false},
		{"new-1", "emptyfix", false},
		{"old-2", "empty", true},
		{"new-2", "emptyfix", true},
	}
	for _, tt := range tests {
		k := codeKeyer(t, client(t, srv, c.Bucket()), tt.code)
		if _, ok := k.LookupDigest(ctx, sha256.Sum256(sig), ""); ok != tt.wantMemo {
			t.Fatalf("%s (%s): digest-first lookup known=%v, want %v", tt.replica, tt.code, ok, tt.wantMemo)
		}
		res, err := k.Key(ctx, sig)
		if err != nil {
			t.Fatal(err)
		}
		if res.Key.String() != wantKey[tt.code] || res.Memo != tt.wantMemo {
			t.Fatalf("%s (%s): key %s memo=%v; want key %s memo=%v", tt.replica, tt.code, res.Key, res.Memo, wantKey[tt.code], tt.wantMemo)
		}
		if !tt.wantMemo {
			drain(t, k, 1)
		}
	}
}
