package gc_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/fleet/gc"
	"github.com/cachesvc/cachesvc/fleet/registry"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const prefix = "fleet/"

// env is one bucket with a store/s3 store on it, and helpers that make
// objects look old by back-dating their files in versitygw's posix
// directory (the server reports a file's mtime as LastModified).
type env struct {
	t      *testing.T
	srv    *s3test.Server
	cfg    s3.Config
	bucket *registry.Bucket
	st     *s3.Store
}

func newEnv(t *testing.T, srv *s3test.Server) *env {
	t.Helper()
	cfg := s3.Config{
		Endpoint: srv.Endpoint, Bucket: srv.NewBucket(t), Prefix: prefix, Region: s3test.Region,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Insecure: true,
		UsageInterval: -1, MaxRetries: 1, Logger: quiet,
		InlineMax: -1, // every entry has a blob object (TestGcInlineEntries covers the others)
	}
	st, err := s3.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := registry.Dial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, srv: srv, cfg: cfg, bucket: b, st: st}
}

func keyOf(name string) store.Key { return sha256.Sum256([]byte(name)) }

func entryName(ns, name string) string { return prefix + "entries/" + ns + "/" + keyOf(name).String() }

func blobName(data string) string {
	sum := sha256.Sum256([]byte(data))
	return prefix + "blobs/" + hex.EncodeToString(sum[:])
}

// put stores entry name in ns with data and back-dates its record and blob.
func (e *env) put(ns, name, data string, age time.Duration) {
	e.t.Helper()
	_, err := e.st.Put(context.Background(), ns, keyOf(name), strings.NewReader(data), store.PutOptions{Size: int64(len(data)), Backend: "xla"})
	if err != nil {
		e.t.Fatalf("put %s: %v", name, err)
	}
	e.backdate(entryName(ns, name), age)
	e.backdate(blobName(data), age)
}

// object writes a raw object (a blob of a Put in flight, debris).
func (e *env) object(name, data string, age time.Duration) {
	e.t.Helper()
	_, err := e.bucket.Client.PutObject(context.Background(), e.bucket.Name, name, strings.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.backdate(name, age)
}

// backdate sets object name's LastModified to age ago (0 leaves it).
func (e *env) backdate(name string, age time.Duration) {
	e.t.Helper()
	if age == 0 {
		return
	}
	at := time.Now().Add(-age)
	if err := os.Chtimes(e.srv.ObjectPath(e.bucket.Name, name), at, at); err != nil {
		e.t.Fatalf("back-date %s: %v", name, err)
	}
}

// access writes an access log of replica r naming entries, age ago.
func (e *env) access(r string, age time.Duration, ns string, names ...string) {
	e.t.Helper()
	a, err := registry.NewAccessLog(registry.AccessConfig{Bucket: e.bucket, ID: r, Logger: quiet})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, n := range names {
		a.Touch(ns, keyOf(n))
	}
	if err := a.Close(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	for _, name := range e.names(e.bucket.AccessPrefix(r)) {
		e.backdate(name, age)
	}
}

func (e *env) names(p string) []string {
	e.t.Helper()
	var out []string
	for obj := range e.bucket.Client.ListObjects(context.Background(), e.bucket.Name, minio.ListObjectsOptions{Prefix: p, Recursive: true}) {
		if obj.Err != nil {
			e.t.Fatal(obj.Err)
		}
		out = append(out, obj.Key)
	}
	return out
}

func (e *env) exists(name string) bool {
	_, err := e.bucket.Client.StatObject(context.Background(), e.bucket.Name, name, minio.StatObjectOptions{})
	return err == nil
}

const (
	day   = 24 * time.Hour
	young = time.Hour
	old   = 800 * time.Hour // past the default 720 h
)

func TestGcRun(t *testing.T) {
	srv := s3test.Start(t)
	tests := []struct {
		name   string
		setup  func(e *env)
		dryRun bool
		want   gc.Report
		kept   []string // objects that must remain
		gone   []string // objects that must be removed
	}{
		{
			name:  "fresh entry kept",
			setup: func(e *env) { e.put("default", "a", "aaaa", young) },
			want:  gc.Report{EntriesKept: 1, BlobsKept: 1, BytesKept: 4},
			kept:  []string{entryName("default", "a"), blobName("aaaa")},
		},
		{
			name:  "old entry and its blob removed",
			setup: func(e *env) { e.put("default", "a", "aaaa", old) },
			want:  gc.Report{EntriesRemoved: 1, BlobsRemoved: 1, BytesRemoved: 4},
			gone:  []string{entryName("default", "a"), blobName("aaaa")},
		},
		{
			name: "old entry recently accessed by a replica kept",
			setup: func(e *env) {
				e.put("team-a", "a", "aaaa", old)
				e.put("team-a", "b", "bbbbb", old)
				e.access("replica-1", day, "team-a", "a")
			},
			want: gc.Report{EntriesKept: 1, EntriesAccessed: 1, EntriesRemoved: 1, BlobsKept: 1, BytesKept: 4, BlobsRemoved: 1, BytesRemoved: 5, AccessLogsRead: 1},
			kept: []string{entryName("team-a", "a"), blobName("aaaa")},
			gone: []string{entryName("team-a", "b"), blobName("bbbbb")},
		},
		{
			name: "access older than the age does not count, and goes",
			setup: func(e *env) {
				e.put("default", "a", "aaaa", old)
				e.access("replica-1", old, "default", "a")
			},
			want: gc.Report{EntriesRemoved: 1, BlobsRemoved: 1, BytesRemoved: 4, AccessLogsRemoved: 1},
			gone: []string{entryName("default", "a")},
		},
		{
			name: "access in another namespace does not count",
			setup: func(e *env) {
				e.put("default", "a", "aaaa", old)
				e.access("replica-1", day, "team-a", "a")
			},
			want: gc.Report{EntriesRemoved: 1, BlobsRemoved: 1, BytesRemoved: 4, AccessLogsRead: 1},
		},
		{
			name: "shared blob referenced by a kept entry kept",
			setup: func(e *env) {
				e.put("default", "old", "same bytes", old)
				e.put("team-b", "new", "same bytes", young)
			},
			want: gc.Report{EntriesKept: 1, EntriesRemoved: 1, BlobsKept: 1, BytesKept: 10},
			kept: []string{entryName("team-b", "new"), blobName("same bytes")},
			gone: []string{entryName("default", "old")},
		},
		{
			name: "dry run deletes nothing",
			setup: func(e *env) {
				e.put("default", "a", "aaaa", old)
				e.object(prefix+"uploads/0123", "tmp", 2*time.Hour)
				e.access("replica-1", old, "default", "a")
			},
			dryRun: true,
			want:   gc.Report{DryRun: true, EntriesRemoved: 1, BlobsRemoved: 1, BytesRemoved: 4, UploadsRemoved: 1, AccessLogsRemoved: 1},
			kept:   []string{entryName("default", "a"), blobName("aaaa"), prefix + "uploads/0123"},
		},
		{
			name: "put in flight: blob without a record kept for the grace",
			setup: func(e *env) {
				e.object(blobName("in flight"), "in flight", 0)                       // record not yet written
				e.object(blobName("orphan"), "orphan", 2*time.Hour)                   // lost a race long ago
				e.object(prefix+"blobs/not-a-digest", "x", 2*time.Hour)               // not ours
				e.object(prefix+"entries/default/not-a-key", "{}", old)               // not ours
				e.object(prefix+"quarantine/default/"+keyOf("q").String(), "{}", old) // left for people
			},
			want: gc.Report{BlobsKept: 1, BlobsYoung: 1, BytesKept: 9, BlobsRemoved: 1, BytesRemoved: 6},
			kept: []string{blobName("in flight"), prefix + "blobs/not-a-digest", prefix + "entries/default/not-a-key", prefix + "quarantine/default/" + keyOf("q").String()},
			gone: []string{blobName("orphan")},
		},
		{
			name: "debris: uploads, leases and replicas past their time",
			setup: func(e *env) {
				e.object(prefix+"uploads/old", "tmp", 2*time.Hour)
				e.object(prefix+"uploads/new", "tmp", 0)
				now := time.Now().UTC()
				e.object(prefix+"leases/default/expired", fmt.Sprintf(`{"holder":"h","expires":%q}`, now.Add(-2*time.Hour).Format(time.RFC3339)), 3*time.Hour)
				e.object(prefix+"leases/default/just-expired", fmt.Sprintf(`{"holder":"h","expires":%q}`, now.Add(-time.Minute).Format(time.RFC3339)), 3*time.Hour)
				e.object(prefix+"leases/default/held", fmt.Sprintf(`{"holder":"h","expires":%q}`, now.Add(time.Hour).Format(time.RFC3339)), 0)
				e.object(prefix+"leases/default/garbled", "?", 26*time.Hour)
				e.object(prefix+"leases/default/garbled-new", "?", 2*time.Hour)
				e.object(prefix+"replicas/gone.json", "{}", 2*time.Hour)
				e.object(prefix+"replicas/ok.json", "{}", time.Minute)
			},
			want: gc.Report{UploadsRemoved: 1, LeasesRemoved: 2, ReplicasRemoved: 1},
			kept: []string{prefix + "uploads/new", prefix + "leases/default/just-expired", prefix + "leases/default/held", prefix + "leases/default/garbled-new", prefix + "replicas/ok.json"},
			gone: []string{prefix + "uploads/old", prefix + "leases/default/expired", prefix + "leases/default/garbled", prefix + "replicas/gone.json"},
		}, {
			name: "fleet state: run manifest parts and memo objects not written within the age",
			setup: func(e *env) {
				e.object(prefix+"runs/default/sweep-1/a.json", "{}", old)
				e.object(prefix+"runs/default/sweep-2/a.json", "{}", day)
				e.object(prefix+"memo/xla@0.9.0/"+strings.Repeat("ab", 32), "{}", old)
				e.object(prefix+"memo/xla@1.0.0/"+strings.Repeat("cd", 32), "{}", day)
			},
			want: gc.Report{RunPartsRemoved: 1, MemoRemoved: 1},
			kept: []string{prefix + "runs/default/sweep-2/a.json", prefix + "memo/xla@1.0.0/" + strings.Repeat("cd", 32)},
			gone: []string{prefix + "runs/default/sweep-1/a.json", prefix + "memo/xla@0.9.0/" + strings.Repeat("ab", 32)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, srv)
			tt.setup(e)
			var phases []string
			rep, err := gc.Run(context.Background(), gc.Config{
				Bucket: e.bucket, DryRun: tt.dryRun, Logger: quiet,
				Progress: func(p gc.Progress) {
					if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
						phases = append(phases, p.Phase)
					}
				},
			})
			if err != nil {
				t.Fatalf("gc: %v", err)
			}
			rep.Started, rep.Duration = time.Time{}, 0
			if rep != tt.want {
				t.Errorf("report\n%+v, want\n%+v", rep, tt.want)
			}
			for _, n := range tt.kept {
				if !e.exists(n) {
					t.Errorf("%s removed, want kept", n)
				}
			}
			for _, n := range tt.gone {
				if e.exists(n) {
					t.Errorf("%s kept, want removed", n)
				}
			}
			if want := []string{gc.PhaseAccess, gc.PhaseEntries, gc.PhaseBlobs, gc.PhaseUploads, gc.PhaseMultipart, gc.PhaseLeases, gc.PhaseRuns, gc.PhaseMemo, gc.PhaseReplicas}; fmt.Sprint(phases) != fmt.Sprint(want) {
				t.Errorf("progress phases %v, want %v", phases, want)
			}
		})
	}
}

// TestGcAbortsMultipart: with the clock two hours ahead (an upload begun
// two hours ago: versitygw's upload times cannot be back-dated), an
// incomplete multipart upload is aborted and a fresh entry is kept.
func TestGcAbortsMultipart(t *testing.T) {
	srv := s3test.Start(t)
	e := newEnv(t, srv)
	e.put("default", "a", "aaaa", 0)
	core := minio.Core{Client: e.bucket.Client}
	if _, err := core.NewMultipartUpload(context.Background(), e.bucket.Name, prefix+"blobs/"+strings.Repeat("ab", 32), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		ahead   time.Duration
		aborted int64
	}{
		{"young upload left alone", 0, 0},
		{"old upload aborted", 2 * time.Hour, 1},
		{"nothing left", 2 * time.Hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := gc.Run(context.Background(), gc.Config{Bucket: e.bucket, Logger: quiet, Now: func() time.Time { return time.Now().Add(tt.ahead) }})
			if err != nil {
				t.Fatal(err)
			}
			if rep.MultipartAborted != tt.aborted || rep.EntriesKept != 1 || rep.BlobsKept != 1 {
				t.Errorf("report %+v, want %d aborted and the entry kept", rep, tt.aborted)
			}
		})
	}
	n := 0
	for u := range e.bucket.Client.ListIncompleteUploads(context.Background(), e.bucket.Name, prefix, true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		n++
	}
	if n != 0 {
		t.Errorf("%d incomplete uploads left", n)
	}
	if _, rc, err := e.st.Get(context.Background(), "default", keyOf("a"), 0, -1); err != nil {
		t.Errorf("entry unreadable after gc: %v", err)
	} else {
		b, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(b, []byte("aaaa")) {
			t.Errorf("entry reads %q", b)
		}
	}
}

// TestGcWhilePutting runs gc over and over while entries are stored: a
// blob whose record is not yet written is in its grace, so every Put
// survives every run and reads back its bytes.
func TestGcWhilePutting(t *testing.T) {
	srv := s3test.Start(t)
	e := newEnv(t, srv)
	ctx := context.Background()
	done := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(done)
		for i := range 40 {
			data := fmt.Sprintf("entry %d", i)
			if _, err := e.st.Put(ctx, "default", keyOf(data), strings.NewReader(data), store.PutOptions{Size: int64(len(data))}); err != nil {
				errs <- err
				return
			}
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		if _, err := gc.Run(ctx, gc.Config{Bucket: e.bucket, Logger: quiet}); err != nil {
			t.Fatalf("gc: %v", err)
		}
	}
	select {
	case err := <-errs:
		t.Fatalf("put: %v", err)
	default:
	}
	for i := range 40 {
		data := fmt.Sprintf("entry %d", i)
		_, rc, err := e.st.Get(ctx, "default", keyOf(data), 0, -1)
		if err != nil {
			t.Fatalf("entry %d after gc: %v", i, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != data {
			t.Fatalf("entry %d reads %q, %v", i, b, err)
		}
	}
}

func TestGcErrors(t *testing.T) {
	srv := s3test.Start(t)
	e := newEnv(t, srv)
	e.put("default", "a", "aaaa", old)
	tests := []struct {
		name string
		cfg  func() gc.Config
		want string
	}{
		{"no bucket", func() gc.Config { return gc.Config{} }, "no bucket"},
		{"negative age", func() gc.Config { return gc.Config{Bucket: e.bucket, OlderThan: -time.Hour} }, "negative"},
		{"no such bucket", func() gc.Config {
			return gc.Config{Bucket: &registry.Bucket{Client: e.bucket.Client, Name: "no-such-bucket", Prefix: prefix}}
		}, "no-such-bucket"},
		{"canceled", func() gc.Config { return gc.Config{Bucket: e.bucket, Logger: quiet} }, "context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.name == "canceled" {
				c, cancel := context.WithCancel(ctx)
				cancel()
				ctx = c
			}
			_, err := gc.Run(ctx, tt.cfg())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want %q", err, tt.want)
			}
		})
	}
	if !e.exists(blobName("aaaa")) || !e.exists(entryName("default", "a")) {
		t.Error("a failed run removed something")
	}
}

// TestGcPages has more used and unused entries than one page of record
// reads: every page's digests are marked.
func TestGcPages(t *testing.T) {
	srv := s3test.Start(t)
	e := newEnv(t, srv)
	const n = 300 // > the 256 records read per page
	for i := range n {
		e.put("default", fmt.Sprint("new", i), fmt.Sprint("bytes of new ", i), young)
		e.put("team-a", fmt.Sprint("old", i), fmt.Sprint("bytes of old ", i), old)
	}
	rep, err := gc.Run(context.Background(), gc.Config{Bucket: e.bucket, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if rep.EntriesKept != n || rep.EntriesRemoved != n || rep.BlobsKept != n || rep.BlobsRemoved != n {
		t.Errorf("report %+v, want %d of each kept and removed", rep, n)
	}
	if got := len(e.names(prefix + "blobs/")); got != n {
		t.Errorf("%d blobs left, want %d", got, n)
	}
}

// TestGcInlineEntries checks entries small enough to live inside their
// record (no blob object): an old unused one is removed, a young one kept.
func TestGcInlineEntries(t *testing.T) {
	e := newEnv(t, s3test.Start(t))
	cfg := e.cfg
	cfg.InlineMax = 0 // the default: entries up to 64 KiB are inline
	st, err := s3.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, c := range []struct {
		name string
		age  time.Duration
	}{{"inline-old", old}, {"inline-young", young}} {
		data := "small " + c.name
		if _, err := st.Put(context.Background(), "ns", keyOf(c.name), strings.NewReader(data), store.PutOptions{Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if e.exists(blobName(data)) {
			t.Fatalf("%s has a blob object: not inline", c.name)
		}
		e.backdate(entryName("ns", c.name), c.age)
	}
	if _, err := gc.Run(context.Background(), gc.Config{Bucket: e.bucket, OlderThan: 720 * time.Hour, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	if e.exists(entryName("ns", "inline-old")) || !e.exists(entryName("ns", "inline-young")) {
		t.Errorf("after gc: old inline entry present %v (want false), young present %v (want true)",
			e.exists(entryName("ns", "inline-old")), e.exists(entryName("ns", "inline-young")))
	}
}

// TestGcUnreadableRecordNamesEntry: a young record that does not decode is
// kept and counted, and its warning names the entry's namespace and key
// (the attributes every entry log uses) besides the object.
func TestGcUnreadableRecordNamesEntry(t *testing.T) {
	e := newEnv(t, s3test.Start(t))
	e.object(entryName("team-a", "damaged"), "not a record", young)
	var logs bytes.Buffer
	rep, err := gc.Run(context.Background(), gc.Config{Bucket: e.bucket, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if rep.EntriesUnreadable != 1 || !e.exists(entryName("team-a", "damaged")) {
		t.Fatalf("report %+v, record kept %v; want one unreadable, kept", rep, e.exists(entryName("team-a", "damaged")))
	}
	want := fmt.Sprintf(`"namespace":"team-a","key":"%s","object":"%s"`, keyOf("damaged"), entryName("team-a", "damaged"))
	if !strings.Contains(logs.String(), want) {
		t.Errorf("gc log lacks %s:\n%s", want, logs.String())
	}
}
