package s3_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

// oldBytes regenerates the bytes behind the golden records: the upgrade
// trial wrote sha256(tag-i) repeated to n bytes.
func oldBytes(seed string, n int) []byte {
	sum := sha256.Sum256([]byte(seed))
	return bytes.Repeat(sum[:], n/32+1)[:n]
}

// putObject writes an object as it is, as another replica would.
func putObject(t *testing.T, c *minio.Client, bucket, name string, b []byte) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), bucket, name, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestOlderRecordsRead: records exactly as a replica of 2026-12-02
// (6ac197f) wrote them to the bucket, v1 naming a blob object and v2 inline
// with components (testdata/records), read on this version with every
// field and byte, so that a rolling upgrade's new replicas serve the old
// ones' entries.
func TestOlderRecordsRead(t *testing.T) {
	srv := s3test.Start(t)
	c := srv.Client(t, nil)
	tests := []struct {
		file, key string
		data      []byte
		name      string
		comps     int
	}{
		{"v1-blob.json", "a335c1f27da5c6db83af1c300ea1ce09b0221eb9d85a1b65c4d7bb198c704285", oldBytes("fa-2", 70000), "jit_f2", 0},
		{"v2-inline.json", "a66595d80b24d32989d3523297cf3b9d88fc0dee46f824eb53bf845bb8b9ea9c", oldBytes("fa-xla", 3000), "sig-xla", 11},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			rec, err := os.ReadFile(filepath.Join("testdata", "records", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(tc.data)
			if !bytes.Contains(rec, []byte(`"v":2`)) {
				putObject(t, c, bucket, "cache/blobs/"+store.Key(sum).String(), tc.data)
			}
			putObject(t, c, bucket, "cache/entries/default/"+tc.key, rec)
			s := open(t, config(srv, bucket))
			defer s.Close()
			key, err := cachekey.ParseKey(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			m, rc, err := s.Get(context.Background(), "default", key, 0, -1)
			if err != nil {
				t.Fatalf("Get of an older record: %v", err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, tc.data) {
				t.Fatalf("read %d bytes, %v; want the %d the old replica stored", len(got), err, len(tc.data))
			}
			if m.Name != tc.name || m.Writer != "ci" || m.Run != "run-fa" || m.Backend != "xla" || len(m.Components) != tc.comps || m.Created.IsZero() {
				t.Fatalf("metadata %+v; want name %s, writer ci, run run-fa, backend xla, %d components, created", m, tc.name, tc.comps)
			}
		})
	}
}

// TestNewerRecordLeftAsIs: a record of a version this binary does not know
// (a newer replica's, during a rolling upgrade) is ErrNewerFormat for Get,
// Stat and Put, and is left exactly as it is: before, a newer record that
// did not decode, or whose inline bytes this version checked differently,
// was quarantined for the whole fleet (the record moved under quarantine/),
// so an old replica destroyed new entries for every replica.
func TestNewerRecordLeftAsIs(t *testing.T) {
	srv := s3test.Start(t)
	c := srv.Client(t, nil)
	golden, err := os.ReadFile(filepath.Join("testdata", "records", "v2-inline.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(golden, &doc); err != nil {
		t.Fatal(err)
	}
	encode := func(change func(map[string]any)) []byte {
		d := make(map[string]any, len(doc))
		for k, v := range doc {
			d[k] = v
		}
		change(d)
		b, _ := json.Marshal(d)
		return b
	}
	tests := []struct {
		name string
		rec  []byte
	}{
		// Decodes as v2 would, but its data is encoded some new way: as
		// v2 it fails its sha256 (which quarantined it).
		{"v3 inline, new encoding", encode(func(d map[string]any) { d["v"] = 3; d["data"] = "AAAA" })},
		// Does not decode as v2 at all (which quarantined it).
		{"v3, size an object", encode(func(d map[string]any) { d["v"] = 3; d["size"] = map[string]any{"bytes": 3000} })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			name := "cache/entries/default/" + doc["key"].(string)
			putObject(t, c, bucket, name, tc.rec)
			s := open(t, config(srv, bucket))
			defer s.Close()
			key, err := cachekey.ParseKey(doc["key"].(string))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, _, err := s.Get(ctx, "default", key, 0, -1); !errors.Is(err, store.ErrNewerFormat) || errors.Is(err, store.ErrCorrupt) {
				t.Errorf("Get = %v, want ErrNewerFormat", err)
			}
			if _, err := s.Stat(ctx, "default", key); !errors.Is(err, store.ErrNewerFormat) {
				t.Errorf("Stat = %v, want ErrNewerFormat", err)
			}
			data := oldBytes("fa-xla", 3000)
			if _, err := s.Put(ctx, "default", key, bytes.NewReader(data), store.PutOptions{Size: -1}); !errors.Is(err, store.ErrNewerFormat) {
				t.Errorf("Put = %v, want ErrNewerFormat", err)
			}
			if got := objects(t, c, bucket, "cache/quarantine/"); len(got) != 0 {
				t.Errorf("quarantine/ holds %v, want nothing", got)
			}
			obj, err := c.GetObject(ctx, bucket, name, minio.GetObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(obj)
			obj.Close()
			if err != nil || !bytes.Equal(b, tc.rec) {
				t.Errorf("record after the reads: %d bytes, %v; want it untouched", len(b), err)
			}
			if u := s.Usage(); u.IntegrityFailures != 0 {
				t.Errorf("Usage %+v: a newer record is no integrity failure", u)
			}
		})
	}
}
