package tiered_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
	"github.com/cachesvc/cachesvc/store/tiered"
)

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// copyDir copies the files of src into a new directory: a snapshot of the
// queue as a kill -9 would leave it, taken while its store runs.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	des, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(src, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, de.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestBehindOutage: with S3 stopped, write-behind Puts succeed into the
// queue, and entries the small hot tier evicts before their upload are
// still served (from the queue's copy). The queue is then snapshotted as a
// kill -9 leaves it; a process restarted on the snapshot, with S3 back,
// drains it, and a second replica with an empty hot tier reads every entry.
func TestBehindOutage(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	dir := t.TempDir()
	const size = 1 << 20
	var logsA, logsA2 storetest.LogBuffer // the uploaders log while the test reads
	a := newReplica(t, srv, bucket, dir, opts{mode: tiered.ModeBehind, hotMax: 3 * size, logger: slog.New(slog.NewJSONHandler(&logsA, nil))})
	srv.Stop()
	sizes := []int{4 << 10, size, size, size, size, 0}
	keys := make([]store.Key, len(sizes))
	for i, n := range sizes {
		keys[i] = storetest.KeyOf(string(rune('a' + i)))
		put(t, a, keys[i], storetest.Data(uint64(i), n))
	}
	if st := a.Stats(); st.QueueEntries != int64(len(sizes)) || st.QueueBytes != int64(4<<10+4*size) || st.OldestQueued.IsZero() {
		t.Fatalf("Stats = %+v, want %d entries queued", st, len(sizes))
	}
	if a.Usage().Evictions == 0 {
		t.Fatal("the hot tier evicted nothing: the test does not cover eviction before upload")
	}
	for i, n := range sizes {
		if got, err := read(t, a, keys[i], 0, -1); err != nil || !bytes.Equal(got, storetest.Data(uint64(i), n)) {
			t.Fatalf("read of queued entry %d with S3 down: %d bytes, %v", i, len(got), err)
		}
	}
	snapshot := copyDir(t, dir+"-queue")
	a.Close()
	// The operator learns what stays queued, and that it is not lost.
	if l := logsA.String(); !strings.Contains(l, "upload queue not empty at shutdown") || !strings.Contains(l, `"entries":6`) {
		t.Errorf("closing with 6 entries queued logs no word of them:\n%s", l)
	}

	srv.Restart(t)
	a2 := newReplica(t, srv, bucket, dir, opts{mode: tiered.ModeBehind, queueDir: snapshot, logger: slog.New(slog.NewJSONHandler(&logsA2, nil))})
	defer a2.Close()
	if l := logsA2.String(); !strings.Contains(l, "upload queue resumed") || !strings.Contains(l, `"entries":6`) {
		t.Errorf("opening a queue of 6 entries logs no word of them:\n%s", l)
	}
	waitFor(t, 30*time.Second, "the queue did not drain", func() bool { return a2.Stats().QueueEntries == 0 })
	if st := a2.Stats(); st.Uploaded != int64(len(sizes)) || st.QueueBytes != 0 || !st.OldestQueued.IsZero() {
		t.Fatalf("Stats after draining = %+v", st)
	}
	b := newReplica(t, srv, bucket, t.TempDir(), opts{})
	defer b.Close()
	for i, n := range sizes {
		if got, err := read(t, b, keys[i], 0, -1); err != nil || !bytes.Equal(got, storetest.Data(uint64(i), n)) {
			t.Fatalf("replica B read of entry %d: %d bytes, %v", i, len(got), err)
		}
	}
	if names, _ := os.ReadDir(snapshot); len(names) != 0 {
		t.Fatalf("queue directory keeps %d files after draining", len(names))
	}
}

// TestBehindQueueFull fills the queue (S3 stopped, so nothing drains) and
// checks that the next Put fails with store.ErrQueueFull and stores
// nothing, by entries and by bytes, declared or not.
func TestBehindQueueFull(t *testing.T) {
	srv := s3test.Start(t)
	tests := []struct {
		name       string
		maxEntries int
		maxBytes   int64
		sizes      []int // all fit but the last
		declared   bool
		want       string // in the error
	}{
		{"entries", 2, 0, []int{1000, 1000, 1000}, true, ": 2 entries queued"},
		{"one entry", 1, 0, []int{1000, 1000}, true, ": 1 entry queued"},
		{"bytes declared", 0, 3000, []int{2000, 2000}, true, ": 2000 bytes queued, 2000 more do not fit"},
		{"bytes undeclared", 0, 3000, []int{2000, 2000}, false, " bytes queued"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			a := newReplica(t, srv, bucket, t.TempDir(), opts{mode: tiered.ModeBehind, maxQueueEntries: tc.maxEntries, maxQueueBytes: tc.maxBytes})
			defer a.Close()
			srv.Stop()
			defer srv.Restart(t)
			for j, n := range tc.sizes {
				data := storetest.Data(uint64(10*i+j), n)
				key := storetest.KeyOf(tc.name + string(rune('a'+j)))
				o := store.PutOptions{Size: -1}
				if tc.declared {
					sum := sha256.Sum256(data)
					o = store.PutOptions{Size: int64(n), SHA256: &sum}
				}
				_, err := a.Put(context.Background(), "default", key, bytes.NewReader(data), o)
				last := j == len(tc.sizes)-1
				if !last && err != nil {
					t.Fatalf("Put %d: %v", j, err)
				}
				if last {
					if !errors.Is(err, store.ErrQueueFull) || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("Put into a full queue = %v, want ErrQueueFull saying %q", err, tc.want)
					}
					if _, err := a.hot.Stat(context.Background(), "default", key); !errors.Is(err, store.ErrNotFound) {
						t.Fatalf("refused Put left the entry in the hot tier: %v", err)
					}
				}
			}
			if st := a.Stats(); st.QueueFull != 1 || st.QueueEntries != int64(len(tc.sizes)-1) {
				t.Fatalf("Stats = %+v", st)
			}
		})
	}
}

// TestBehindConflict: a write-behind entry whose key another replica
// stored first with other bytes is dropped at upload (the fleet's first
// writer wins) and this replica then serves the fleet's bytes.
func TestBehindConflict(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	key := storetest.KeyOf("conflict")
	other := newReplica(t, srv, bucket, t.TempDir(), opts{})
	defer other.Close()
	winner := storetest.Data(1, 5000)
	put(t, other, key, winner)
	a := newReplica(t, srv, bucket, t.TempDir(), opts{mode: tiered.ModeBehind})
	defer a.Close()
	put(t, a, key, storetest.Data(2, 5000))
	waitFor(t, 10*time.Second, "the conflicting entry stayed queued", func() bool { return a.Stats().QueueEntries == 0 })
	if st := a.Stats(); st.UploadsDropped != 1 {
		t.Fatalf("Stats = %+v, want one dropped upload", st)
	}
	if got, err := read(t, a, key, 0, -1); err != nil || !bytes.Equal(got, winner) {
		t.Fatalf("read after the conflict: %d bytes, %v; want the fleet's bytes", len(got), err)
	}
}

// TestBehindFlush: Flush with S3 down returns when its context ends and
// keeps every entry queued; once S3 is back, Flush wakes the uploaders out
// of the backoff that the outage built up and returns with the queue empty
// and every entry in the bucket, well before that backoff would have ended.
func TestBehindFlush(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	a := newReplica(t, srv, bucket, t.TempDir(), opts{mode: tiered.ModeBehind})
	defer a.Close()
	srv.Stop()
	keys := []store.Key{storetest.KeyOf("f1"), storetest.KeyOf("f2"), storetest.KeyOf("f3")}
	for i, k := range keys {
		put(t, a, k, storetest.Data(uint64(i), 10<<10))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := a.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush with S3 down = %v, want the context's deadline", err)
	}
	if n := a.Stats().QueueEntries; n != int64(len(keys)) {
		t.Fatalf("after a Flush cut short, %d entries queued, want %d", n, len(keys))
	}
	// Let the backoff grow past what the wait below allows: after 8
	// retries each, both uploaders wait 12.8 s before the next.
	waitFor(t, time.Minute, "the uploaders never retried", func() bool { return a.Stats().UploadRetries >= 16 })
	srv.Restart(t)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel2()
	if err := a.Flush(ctx2); err != nil {
		t.Fatalf("Flush with S3 back = %v, want nil; stats %+v", err, a.Stats())
	}
	b := newReplica(t, srv, bucket, t.TempDir(), opts{})
	defer b.Close()
	for i, k := range keys {
		if got, err := read(t, b, k, 0, -1); err != nil || !bytes.Equal(got, storetest.Data(uint64(i), 10<<10)) {
			t.Fatalf("entry %d not in the bucket after Flush: %d bytes, %v", i, len(got), err)
		}
	}
}

// countingReader counts what is read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestBehindQueueKeepsDiskReserve puts an entry into the write-behind
// queue of a hot tier whose free-disk reserve no disk has: the queue
// refuses (store.ErrFull) before it has copied the body, instead of filling
// the disk under Badger's memory maps with its copy first and leaving the
// refusal to the hot tier's Put, and nothing stays queued.
func TestBehindQueueKeepsDiskReserve(t *testing.T) {
	srv := s3test.Start(t)
	a := newReplica(t, srv, srv.NewBucket(t), t.TempDir(), opts{mode: tiered.ModeBehind, minFreeDisk: 1 << 60})
	defer a.Close()
	const size = 4 << 20
	body := &countingReader{r: bytes.NewReader(storetest.Data(1, size))}
	_, err := a.Put(context.Background(), "default", storetest.KeyOf("big"), body, store.PutOptions{Size: size})
	if !errors.Is(err, store.ErrFull) || !strings.Contains(err.Error(), "upload queue") {
		t.Fatalf("Put over the reserve = %v, want ErrFull from the upload queue", err)
	}
	if body.n >= size {
		t.Errorf("the queue read all %d bytes of the body before refusing", body.n)
	}
	if st := a.Stats(); st.QueueEntries != 0 || st.QueueBytes != 0 {
		t.Errorf("after the refusal: %d entries, %d bytes queued", st.QueueEntries, st.QueueBytes)
	}
}

// TestBehindShutdownWarningTellsTheTruth closes a replica with entries
// queued (S3 stopped): with its queue directory intact the log says they
// are uploaded at the next start on it; with the directory removed, or
// removed and made again, it says they are lost, not that a restart will
// upload them. Either way it names them (namespace/key, oldest first),
// and a Flush before Close (as serve's) does not report them uploaded:
// before, uploaders that found the queue's files gone dropped the entries
// without a word, Flush found the queue empty and Close named none.
func TestBehindShutdownWarningTellsTheTruth(t *testing.T) {
	srv := s3test.Start(t)
	tests := []struct {
		name    string
		damage  func(queueDir string) error
		want    string
		notWant string
	}{
		{"intact", func(string) error { return nil }, "are uploaded when it starts again on the same data directory", "lost"},
		{"removed", os.RemoveAll, "are lost", "starts again"},
		{"removed and made again", func(d string) error { return errors.Join(os.RemoveAll(d), os.Mkdir(d, 0o755)) }, "are lost", "starts again"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var logs storetest.LogBuffer
			a := newReplica(t, srv, srv.NewBucket(t), dir, opts{mode: tiered.ModeBehind, logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			srv.Stop()
			defer srv.Restart(t)
			var names []string
			for i := range 2 {
				key := storetest.KeyOf(tc.name + string(rune('a'+i)))
				put(t, a, key, storetest.Data(uint64(i), 1000))
				names = append(names, store.DefaultNamespace+"/"+key.String())
			}
			if err := tc.damage(dir + "-queue"); err != nil {
				t.Fatal(err)
			}
			// As serve does before it closes: the uploaders try again
			// at once, and find the queue's files gone or there.
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if err := a.Flush(ctx); err == nil {
				t.Errorf("Flush with S3 down: nil (the queue is empty), want the deadline: %d entries were never uploaded", len(names))
			}
			a.Close()
			l := logs.String()
			if !strings.Contains(l, "upload queue not empty at shutdown") || !strings.Contains(l, tc.want) || strings.Contains(l, tc.notWant) {
				t.Errorf("log at shutdown, want %q and not %q:\n%s", tc.want, tc.notWant, l)
			}
			// The operator must be able to tell which entries.
			if want := `"oldest_entries":["` + strings.Join(names, `","`) + `"]`; !strings.Contains(l, want) {
				t.Errorf("log at shutdown does not name the queued entries, want %s:\n%s", want, l)
			}
		})
	}
}
