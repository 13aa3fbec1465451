package jaxsync_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/jaxcache"
	"github.com/cachesvc/cachesvc/jaxcache/jaxsync"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// jaxValue builds a value the way JAX does: compress(4-byte big-endian
// compile seconds ‖ executable).
func jaxValue(secs uint32, payload string) []byte {
	var raw bytes.Buffer
	binary.Write(&raw, binary.BigEndian, secs)
	raw.WriteString(payload)
	var out bytes.Buffer
	w := zlib.NewWriter(&out)
	w.Write(raw.Bytes())
	w.Close()
	return out.Bytes()
}

func hexOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func timeNowPlus(sec int) time.Time { return time.Now().Add(time.Duration(sec) * time.Second) }

func jaxKey(i int) string { return fmt.Sprintf("jit_f%d-%s", i, hexOf(fmt.Sprint("jax", i))) }

func TestWarmFromRun(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	writer, _ := client.New(client.Config{BaseURL: srv.URL, Run: "arm-a"})
	vals := map[string][]byte{}

	for i := 0; i < 7; i++ {
		name := jaxKey(i)
		if i == 6 {
			name = "jit_f6" // not a JAX key: cannot be placed in the dir
		}
		v := jaxValue(uint32(i), strings.Repeat(fmt.Sprint(i), 5000))
		key := hexOf(name)
		sum := sha256.Sum256(v)
		if _, err := writer.Put(ctx, "default", key, bytes.NewReader(v), client.PutOptions{Size: int64(len(v)), SHA256: sum[:], Name: name}); err != nil {
			t.Fatal(err)
		}
		vals[name] = v
	}
	// The run also looked up a key nobody wrote.
	if _, err := writer.Get(ctx, "default", hexOf("never"), 0); !client.IsNotFound(err) {
		t.Fatal(err)
	}

	dir, err := jaxcache.Open(filepath.Join(t.TempDir(), "jaxdir"))
	if err != nil {
		t.Fatal(err)
	}
	// One entry is already there: it must be skipped, not rewritten.
	if _, err := dir.Write(jaxKey(0), bytes.NewReader(vals[jaxKey(0)]), "", time.Now()); err != nil {
		t.Fatal(err)
	}
	reader, _ := client.New(client.Config{BaseURL: srv.URL})
	m, err := reader.Manifest(ctx, "default", "arm-a")
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	res, err := jaxsync.Warm(ctx, jaxsync.WarmConfig{
		Client: reader, Namespace: "default", Dir: dir, Entries: jaxsync.FromManifest(m), ChunkSize: 3,
		Progress: func(done, total int, _ int64) { calls++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := jaxsync.WarmResult{Requested: 8, Written: 5, Present: 1, Missing: 1, Unnamed: 1}
	res.Bytes, res.Seconds = 0, 0
	if res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	if calls < 8 {
		t.Errorf("progress called %d times", calls)
	}
	for i := 0; i < 6; i++ {
		got, err := os.ReadFile(dir.CachePath(jaxKey(i)))
		if err != nil || !bytes.Equal(got, vals[jaxKey(i)]) {
			t.Errorf("%s: %d bytes, %v", jaxKey(i), len(got), err)
		}
		if v, err := jaxcache.Inspect(dir.CachePath(jaxKey(i))); err != nil || v.CompileSeconds != uint32(i) {
			t.Errorf("%s: inspect %+v %v", jaxKey(i), v, err)
		}
		if _, err := os.Stat(filepath.Join(dir.Path(), jaxKey(i)+jaxcache.AtimeSuffix)); err != nil {
			t.Errorf("no atime file: %v", err)
		}
	}
	// A second warm finds everything present without fetching it.
	res, err = jaxsync.Warm(ctx, jaxsync.WarmConfig{Client: reader, Namespace: "default", Dir: dir, Entries: jaxsync.FromManifest(m)})
	if err != nil || res.Present != 6 || res.Written != 0 {
		t.Errorf("second warm = %+v, %v", res, err)
	}
}

func TestReadManifestFile(t *testing.T) {
	dir := t.TempDir()
	k1, k2 := hexOf("a"), hexOf("b")
	tests := []struct {
		name, body string
		want       int
		errHas     string
		namespace  string
	}{
		{"server manifest", `{"run":"r","namespace":"team-a","keys":[{"key":"` + k1 + `","name":"jit_f-x","looked_up":true,"written":false},{"key":"` + k2 + `"}],"truncated":false}`, 2, "", "team-a"},
		{"key strings", `{"keys":["` + k1 + `","` + k2 + `"]}`, 2, "", ""},
		{"bare array", `["` + k1 + `"]`, 1, "", ""},
		{"not json", `{"keys": [`, 0, "not valid JSON", ""},
		{"no keys field", `{"run":"r"}`, 0, `no "keys" field`, ""},
		{"empty", `{"keys":[]}`, 0, "lists no keys", ""},
		{"bad key", `{"keys":["` + k1 + `","XYZ"]}`, 0, "keys[1]", ""},
		{"keys not array", `{"keys":"abc"}`, 0, "must be a JSON array", ""},
		{"bad element", `{"keys":[42]}`, 0, "keys[0] must be", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".json")
			os.WriteFile(p, []byte(tt.body), 0o644)
			ws, ns, err := jaxsync.ReadManifestFile(p)
			if tt.errHas != "" {
				if !errors.Is(err, jaxsync.ErrBadManifest) || !strings.Contains(err.Error(), tt.errHas) || !strings.Contains(err.Error(), p) {
					t.Fatalf("err = %v, want ErrBadManifest naming the file and %q", err, tt.errHas)
				}
				return
			}
			if err != nil || len(ws) != tt.want || ns != tt.namespace {
				t.Fatalf("got %d entries of namespace %q, %v", len(ws), ns, err)
			}
		})
	}
	if _, _, err := jaxsync.ReadManifestFile(filepath.Join(dir, "absent.json")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
}

// TestWarmRetriesBrokenStream: an entry whose stored bytes are corrupt
// breaks the batch stream mid-member; warm retries the rest once, the corrupt
// entry (now quarantined) is reported missing, and no partial file is left.
func TestWarmRetriesBrokenStream(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	c, _ := client.New(client.Config{BaseURL: srv.URL})
	big := storetest.Data(42, 3<<20)
	vals := [][]byte{[]byte("first"), big, []byte("third")}
	var wants []jaxsync.Want
	for i, v := range vals {
		sum := sha256.Sum256(v)
		key := hexOf(jaxKey(i))
		if _, err := c.Put(ctx, "default", key, bytes.NewReader(v), client.PutOptions{Size: int64(len(v)), SHA256: sum[:], Name: jaxKey(i)}); err != nil {
			t.Fatal(err)
		}
		wants = append(wants, jaxsync.Want{Key: key})
	}
	srv.Close()
	if _, err := storetest.FlipInValueLog(srv.Dir, big[2<<20+100:2<<20+164]); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	c, _ = client.New(client.Config{BaseURL: srv.URL})
	dir, _ := jaxcache.Open(t.TempDir())
	res, err := jaxsync.Warm(ctx, jaxsync.WarmConfig{Client: c, Namespace: "default", Dir: dir, Entries: wants})
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 2 || res.Missing != 1 {
		t.Fatalf("warm = %+v, want 2 written and the corrupt entry missing", res)
	}
	des, _ := os.ReadDir(dir.Path())
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	if len(des) != 4 || dir.Has(jaxKey(1)) {
		t.Fatalf("dir holds %v, want the two good entries and their -atime files only", names)
	}
}
