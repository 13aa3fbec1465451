package s3_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// bucketOf names the bucket standing for a storetest directory, so that
// reopening the same dir reopens the same bucket.
func bucketOf(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "st-" + hex.EncodeToString(sum[:8])
}

func config(srv *s3test.Server, bucket string) s3.Config {
	return s3.Config{
		Endpoint:      srv.Endpoint,
		Bucket:        bucket,
		Prefix:        "cache",
		Region:        s3test.Region,
		AccessKey:     s3test.AccessKey,
		SecretKey:     s3test.SecretKey,
		Insecure:      true,
		PartSize:      s3.MinPartSize, // small parts: multipart from 5 MiB
		UsageInterval: -1,
		MaxRetries:    1,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func open(t *testing.T, cfg s3.Config) *s3.Store {
	t.Helper()
	s, err := s3.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open s3 store: %v", err)
	}
	if err := s.ScanUsage(context.Background()); err != nil {
		t.Fatalf("scan usage: %v", err)
	}
	return s
}

// opener returns a storetest.OpenFunc on srv, one bucket per directory.
func opener(srv *s3test.Server) storetest.OpenFunc {
	return func(t *testing.T, dir string, lim storetest.Limits) store.Store {
		bucket := bucketOf(dir)
		srv.EnsureBucket(t, bucket)
		cfg := config(srv, bucket)
		cfg.MaxEntryBytes = lim.MaxEntryBytes
		return open(t, cfg)
	}
}

// corrupter flips the middle byte of data's blob file in the server's
// posix directory, behind the server's back (a damaged disk).
func corrupter(srv *s3test.Server) storetest.CorruptFunc {
	return func(t *testing.T, dir string, data []byte) {
		t.Helper()
		sum := sha256.Sum256(data)
		flipFile(t, srv.ObjectPath(bucketOf(dir), "cache/blobs/"+hex.EncodeToString(sum[:])), len(data)/2)
	}
}

func flipFile(t *testing.T, path string, at int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open blob file: %v", err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, int64(at)); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, int64(at)); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	storetest.Run(t, opener(srv), corrupter(srv))
}

func TestWalkAfter(t *testing.T) {
	storetest.RunWalkAfter(t, opener(s3test.Start(t)))
}

// objects lists every object under prefix in bucket.
func objects(t *testing.T, c *minio.Client, bucket, prefix string) []string {
	t.Helper()
	var out []string
	for obj := range c.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("list: %v", obj.Err)
		}
		out = append(out, obj.Key)
	}
	return out
}

// incomplete counts the bucket's incomplete multipart uploads.
func incomplete(t *testing.T, c *minio.Client, bucket string) int {
	t.Helper()
	n := 0
	for u := range c.ListIncompleteUploads(context.Background(), bucket, "", true) {
		if u.Err != nil {
			t.Fatalf("list incomplete uploads: %v", u.Err)
		}
		n++
	}
	return n
}

// TestLayout checks the object names and the record's content for bodies in
// one PUT and in several parts, with and without a declared digest, and that
// nothing else is left in the bucket.
func TestLayout(t *testing.T) {
	srv := s3test.Start(t)
	c := srv.Client(t, nil)
	tests := []struct {
		name     string
		size     int
		declared bool
		inline   bool // the bytes go in the record, no blob object
	}{
		{"empty", 0, true, true},
		{"small declared", 4 << 10, true, true},
		{"small undeclared", 4 << 10, false, true},
		{"largest inline", s3.DefaultInlineMax, false, true},
		{"smallest blob", s3.DefaultInlineMax + 1, true, false},
		{"multipart declared", 12<<20 + 5, true, false},
		{"multipart undeclared", 12<<20 + 5, false, false},
		{"exactly one part", s3.MinPartSize, false, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			s := open(t, config(srv, bucket))
			defer s.Close()
			data := storetest.Data(uint64(i), tc.size)
			sum := sha256.Sum256(data)
			opts := store.PutOptions{Size: -1, Backend: "xla", Labels: map[string]string{"team": "ml"}}
			if tc.declared {
				opts.SHA256, opts.Size = &sum, int64(len(data))
			}
			key := storetest.KeyOf(tc.name)
			res, err := s.Put(context.Background(), "default", key, bytes.NewReader(data), opts)
			if err != nil || !res.Created {
				t.Fatalf("Put = %+v, %v", res, err)
			}
			record := "cache/entries/default/" + key.String()
			want := []string{"cache/blobs/" + hex.EncodeToString(sum[:]), record}
			if tc.inline {
				want = want[1:]
			}
			if got := objects(t, c, bucket, ""); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("objects = %v, want %v", got, want)
			}
			if n := incomplete(t, c, bucket); n != 0 {
				t.Fatalf("%d incomplete multipart uploads left", n)
			}
			obj, err := c.GetObject(context.Background(), bucket, record, minio.GetObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var rec map[string]any
			if err := json.NewDecoder(obj).Decode(&rec); err != nil {
				t.Fatalf("decode record: %v", err)
			}
			if rec["sha256"] != hex.EncodeToString(sum[:]) || rec["size"] != float64(len(data)) || rec["backend"] != "xla" || rec["key"] != key.String() {
				t.Fatalf("record = %v", rec)
			}
			if inline, _ := rec["data"].(string); tc.inline != (rec["data"] != nil) || tc.inline && inline != base64.StdEncoding.EncodeToString(data) {
				t.Fatalf("record data present %v, want inline %v", rec["data"] != nil, tc.inline)
			}
			if v := rec["v"]; tc.inline && v != float64(2) || !tc.inline && v != float64(1) {
				t.Fatalf("record version %v, inline %v", v, tc.inline)
			}
			_, rc, err := s.Get(context.Background(), "default", key, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("Get: %d bytes, %v", len(got), err)
			}
		})
	}
}

// failAfter returns data's first n bytes, then err.
type failAfter struct {
	r   io.Reader
	n   int
	err error
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	if len(p) > f.n {
		p = p[:f.n]
	}
	n, err := f.r.Read(p)
	f.n -= n
	return n, err
}

// TestFailedPutsLeaveNothing checks that a Put failing after some parts were
// sent leaves no object and no incomplete upload behind.
func TestFailedPutsLeaveNothing(t *testing.T) {
	srv := s3test.Start(t)
	c := srv.Client(t, nil)
	data := storetest.Data(9, 13<<20)
	wrong := sha256.Sum256([]byte("other"))
	errBody := errors.New("client went away")
	tests := []struct {
		name string
		r    io.Reader
		opts store.PutOptions
		want error
	}{
		{"wrong digest", bytes.NewReader(data), store.PutOptions{Size: -1, SHA256: &wrong}, store.ErrDigestMismatch},
		{"short body", bytes.NewReader(data), store.PutOptions{Size: int64(len(data)) + 1}, store.ErrSizeMismatch},
		{"long body", bytes.NewReader(data), store.PutOptions{Size: int64(len(data)) - 1}, store.ErrSizeMismatch},
		{"reader error after two parts", &failAfter{bytes.NewReader(data), 11 << 20, errBody}, store.PutOptions{Size: -1}, errBody},
		{"too large", bytes.NewReader(data), store.PutOptions{Size: -1}, store.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			cfg := config(srv, bucket)
			if tc.want == store.ErrTooLarge {
				cfg.MaxEntryBytes = 12 << 20
			}
			s := open(t, cfg)
			defer s.Close()
			_, err := s.Put(context.Background(), "default", storetest.KeyOf("failed"), tc.r, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Put = %v, want %v", err, tc.want)
			}
			if got := objects(t, c, bucket, ""); len(got) != 0 {
				t.Fatalf("objects left: %v", got)
			}
			if n := incomplete(t, c, bucket); n != 0 {
				t.Fatalf("%d incomplete multipart uploads left", n)
			}
		})
	}
}

// TestCorruptObjectNeverServed overwrites a blob (or an inline entry's
// record) through the S3 API with bytes of the same length and checks that
// a whole read fails before its last byte, and that the entry is
// quarantined for every replica.
func TestCorruptObjectNeverServed(t *testing.T) {
	srv := s3test.Start(t)
	c := srv.Client(t, nil)
	tests := []struct {
		name string
		size int
	}{{"one buffer", 100 << 10}, {"many buffers", 3<<20 + 7}, {"inline", 4 << 10}, {"inline empty replaced", 0}}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			a, b := open(t, config(srv, bucket)), open(t, config(srv, bucket))
			defer a.Close()
			defer b.Close()
			ctx := context.Background()
			data := storetest.Data(uint64(40+i), tc.size)
			key := storetest.KeyOf(tc.name)
			if _, err := a.Put(ctx, "default", key, bytes.NewReader(data), store.PutOptions{Size: -1}); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			bad := bytes.Clone(data)
			if len(bad) > 0 {
				bad[len(bad)/2] ^= 1
			} else {
				bad = []byte("x")
			}
			name, damaged := "cache/blobs/"+hex.EncodeToString(sum[:]), bad
			if len(data) <= s3.DefaultInlineMax {
				name, damaged = "cache/entries/default/"+key.String(), damageRecord(t, c, bucket, "cache/entries/default/"+key.String(), bad)
			}
			if _, err := c.PutObject(ctx, bucket, name, bytes.NewReader(damaged), int64(len(damaged)), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			_, rc, err := b.Get(ctx, "default", key, 0, -1)
			if err == nil {
				var got []byte
				got, err = io.ReadAll(rc)
				rc.Close()
				if len(got) >= len(data) && len(data) > 0 {
					t.Fatalf("read delivered all %d bytes (error %v)", len(got), err)
				}
			}
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("read of a damaged blob = %v, want ErrCorrupt", err)
			}
			if u := b.Usage(); u.IntegrityFailures != 1 {
				t.Fatalf("Usage = %+v, want 1 integrity failure", u)
			}
			if _, err := a.Stat(ctx, "default", key); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("other replica's Stat after quarantine = %v, want ErrNotFound", err)
			}
			if got := objects(t, c, bucket, "cache/quarantine/"); len(got) != 1 {
				t.Fatalf("quarantine = %v", got)
			}
			// The key can be stored again, and the blob with it.
			if _, err := a.Put(ctx, "default", key, bytes.NewReader(data), store.PutOptions{Size: -1}); err != nil {
				t.Fatal(err)
			}
			_, rc, err = b.Get(ctx, "default", key, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read after re-Put: %d bytes, %v", len(got), err)
			}
		})
	}
}

// damageRecord returns the inline record name with its data replaced by bad.
func damageRecord(t *testing.T, c *minio.Client, bucket, name string, bad []byte) []byte {
	t.Helper()
	obj, err := c.GetObject(context.Background(), bucket, name, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	var rec map[string]any
	if err := json.NewDecoder(obj).Decode(&rec); err != nil {
		t.Fatalf("decode record: %v", err)
	}
	rec["data"] = base64.StdEncoding.EncodeToString(bad)
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplicasFirstWriterWins races two stores (two replicas) on one bucket
// writing different bytes under one key: exactly one is created, every
// other Put conflicts, and both replicas read the winner's bytes. The same
// with Config.CheckThenWrite, serially (it has a race window by design).
func TestReplicasFirstWriterWins(t *testing.T) {
	srv := s3test.Start(t)
	t.Run("conditional create", func(t *testing.T) {
		bucket := srv.NewBucket(t)
		replicas := []*s3.Store{open(t, config(srv, bucket)), open(t, config(srv, bucket))}
		key := storetest.KeyOf("race")
		var created, conflicts atomic.Int32
		var winner atomic.Int64
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := replicas[i%2].Put(context.Background(), "default", key, bytes.NewReader(storetest.Data(uint64(i), 200<<10)), store.PutOptions{Size: -1})
				switch {
				case err == nil && res.Created:
					created.Add(1)
					winner.Store(int64(i))
				case errors.Is(err, store.ErrConflict):
					conflicts.Add(1)
				default:
					t.Errorf("Put %d: %+v, %v", i, res, err)
				}
			}()
		}
		wg.Wait()
		if created.Load() != 1 || conflicts.Load() != 7 {
			t.Fatalf("created %d, conflicts %d; want 1 and 7", created.Load(), conflicts.Load())
		}
		want := storetest.Data(uint64(winner.Load()), 200<<10)
		for i, r := range replicas {
			_, rc, err := r.Get(context.Background(), "default", key, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("replica %d read %d bytes, not the winner's: %v", i, len(got), err)
			}
			r.Close()
		}
	})
	t.Run("check then write", func(t *testing.T) {
		bucket := srv.NewBucket(t)
		cfg := config(srv, bucket)
		cfg.CheckThenWrite = true
		s := open(t, cfg)
		defer s.Close()
		ctx := context.Background()
		key := storetest.KeyOf("ctw")
		data := storetest.Data(1, 1000)
		tests := []struct {
			body        []byte
			wantCreated bool
			wantErr     error
		}{{data, true, nil}, {data, false, nil}, {storetest.Data(2, 1000), false, store.ErrConflict}}
		for i, tc := range tests {
			res, err := s.Put(ctx, "default", key, bytes.NewReader(tc.body), store.PutOptions{Size: -1})
			if !errors.Is(err, tc.wantErr) || err == nil && res.Created != tc.wantCreated {
				t.Fatalf("Put %d = %+v, %v; want created %v, error %v", i, res, err, tc.wantCreated, tc.wantErr)
			}
		}
	})
}

// TestServerDown checks that every operation fails with ErrUnavailable,
// promptly and without panicking, while the server is stopped, and works
// again once it is back.
func TestServerDown(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	s := open(t, config(srv, bucket))
	defer s.Close()
	ctx := context.Background()
	key := storetest.KeyOf("down")
	if _, err := s.Put(ctx, "default", key, strings.NewReader("hello"), store.PutOptions{Size: -1}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	ops := []struct {
		name string
		fn   func() error
	}{
		{"Put", func() error {
			_, err := s.Put(ctx, "default", storetest.KeyOf("new"), strings.NewReader("x"), store.PutOptions{Size: -1})
			return err
		}},
		{"Get", func() error { _, _, err := s.Get(ctx, "default", key, 0, -1); return err }},
		{"Stat", func() error { _, err := s.Stat(ctx, "default", key); return err }},
		{"Delete", func() error { return s.Delete(ctx, "default", key) }},
		{"Walk", func() error { return s.Walk(ctx, "", func(store.Meta) bool { return true }) }},
	}
	for _, op := range ops {
		if err := op.fn(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the server down = %v, want ErrUnavailable", op.name, err)
		} else if !strings.Contains(err.Error(), "s3://"+bucket+"/") {
			t.Errorf("%s error %q does not name the object", op.name, err)
		} else if strings.Contains(err.Error(), `"http`) {
			// The object is named once: the URL of net/http's error
			// repeated it (and the key) in every 503's message.
			t.Errorf("%s error %q repeats the object as a URL", op.name, err)
		}
	}
	srv.Restart(t)
	if _, err := s.Stat(ctx, "default", key); err != nil {
		t.Fatalf("Stat after restart: %v", err)
	}
}

// TestUndecodableRecordQuarantined damages an entry record itself (cut
// short, not JSON, a bad digest field) and checks that the first operation
// to meet it, on another replica, moves it under quarantine/ with
// ErrCorrupt, after which the key is a miss, the namespace lists, and the
// key can be stored afresh; before, every Get, Put and Walk of it failed
// for good on every replica.
func TestUndecodableRecordQuarantined(t *testing.T) {
	srv := s3test.Start(t)
	c := srv.Client(t, nil)
	tests := []struct {
		name  string
		size  int
		first string // the operation that meets the damaged record
		bad   func(rec []byte) []byte
	}{
		{"blob entry cut short, Get", 100 << 10, "get", func(rec []byte) []byte { return rec[:len(rec)/2] }},
		{"inline entry not JSON, Put", 1 << 10, "put", func([]byte) []byte { return []byte("\x00garbage") }},
		{"bad sha256 field, Walk", 100 << 10, "walk", func(rec []byte) []byte {
			return bytes.Replace(rec, []byte(`"sha256":"`), []byte(`"sha256":"zz`), 1)
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			a, b := open(t, config(srv, bucket)), open(t, config(srv, bucket))
			defer a.Close()
			defer b.Close()
			ctx := context.Background()
			data := storetest.Data(uint64(70+i), tc.size)
			key, other := storetest.KeyOf(tc.name), storetest.KeyOf(tc.name+" other")
			for _, k := range []store.Key{key, other} {
				if _, err := a.Put(ctx, "default", k, bytes.NewReader(data), store.PutOptions{Size: -1}); err != nil {
					t.Fatal(err)
				}
			}
			name := "cache/entries/default/" + key.String()
			obj, err := c.GetObject(ctx, bucket, name, minio.GetObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := io.ReadAll(obj)
			obj.Close()
			if err != nil {
				t.Fatal(err)
			}
			bad := tc.bad(rec)
			if _, err := c.PutObject(ctx, bucket, name, bytes.NewReader(bad), int64(len(bad)), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			switch tc.first {
			case "get":
				if _, _, err := b.Get(ctx, "default", key, 0, -1); !errors.Is(err, store.ErrCorrupt) {
					t.Fatalf("Get of a damaged record = %v, want ErrCorrupt", err)
				}
			case "put":
				// The writer recompiled: its Put stores the key afresh.
				if res, err := b.Put(ctx, "default", key, bytes.NewReader(data), store.PutOptions{Size: -1}); err != nil || !res.Created {
					t.Fatalf("Put over a damaged record = %+v, %v, want created", res, err)
				}
			case "walk":
				var seen []string
				if err := b.Walk(ctx, "default", func(m store.Meta) bool {
					seen = append(seen, m.Key.String())
					return true
				}); err != nil {
					t.Fatalf("Walk with a damaged record = %v", err)
				}
				if len(seen) != 1 || seen[0] != other.String() {
					t.Fatalf("Walk saw %v, want only %s", seen, other)
				}
			}
			if got := objects(t, c, bucket, "cache/quarantine/"); len(got) != 1 {
				t.Fatalf("quarantine = %v, want the damaged record", got)
			}
			if u := b.Usage(); u.IntegrityFailures != 1 {
				t.Fatalf("Usage = %+v, want 1 integrity failure", u)
			}
			if tc.first != "put" {
				if _, err := a.Stat(ctx, "default", key); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("Stat after quarantine = %v, want ErrNotFound", err)
				}
				if _, err := a.Put(ctx, "default", key, bytes.NewReader(data), store.PutOptions{Size: -1}); err != nil {
					t.Fatal(err)
				}
			}
			_, rc, err := a.Get(ctx, "default", key, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read after re-Put: %d bytes, %v", len(got), err)
			}
		})
	}
}
