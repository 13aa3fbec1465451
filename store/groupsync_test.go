package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fakeSyncs is a sync function the test drives: each call announces itself
// on started (with its number, from 1) and returns the error the test sends
// on finish.
type fakeSyncs struct {
	started chan int
	finish  chan error
	n       int
}

func newFakeSyncs() *fakeSyncs {
	return &fakeSyncs{started: make(chan int), finish: make(chan error)}
}

func (f *fakeSyncs) sync() error {
	f.n++ // only run's goroutine calls it
	f.started <- f.n
	return <-f.finish
}

// startSyncer runs a syncer on f and stops it when the test ends.
func startSyncer(t *testing.T, f *fakeSyncs) *groupSync {
	t.Helper()
	g := newGroupSync(f.sync)
	stop := make(chan struct{})
	go g.run(stop)
	t.Cleanup(func() {
		close(stop)
		<-g.done // run returned: no goroutine left behind
	})
	return g
}

// goWait starts a wait and returns the channel its result arrives on, once
// the waiter has joined the gathering batch.
func goWait(t *testing.T, g *groupSync, ctx context.Context) <-chan error {
	t.Helper()
	before := g.gatheringWaiters()
	res := make(chan error, 1)
	go func() { res <- g.wait(ctx, false) }()
	for g.gatheringWaiters() == before {
		runtime.Gosched()
	}
	return res
}

// pending reports whether res has no result yet.
func pending(res <-chan error) bool {
	select {
	case <-res:
		return false
	default:
		return true
	}
}

func TestGroupSyncCoversOnlyLaterSyncs(t *testing.T) {
	f := newFakeSyncs()
	g := startSyncer(t, f)
	errFirst, errSecond := errors.New("first sync"), errors.New("second sync")

	resA := make(chan error, 1)
	go func() { resA <- g.wait(context.Background(), false) }()
	if n := <-f.started; n != 1 {
		t.Fatalf("sync %d started, want 1", n)
	}
	// B registers while sync 1 runs: sync 1 started before B, so it must
	// not answer B.
	resB := goWait(t, g, context.Background())
	f.finish <- errFirst
	if err := <-resA; !errors.Is(err, errFirst) {
		t.Fatalf("A got %v, want the first sync's error", err)
	}
	if n := <-f.started; n != 2 {
		t.Fatalf("sync %d started, want 2", n)
	}
	if !pending(resB) {
		t.Fatal("B answered before the sync that started after it finished")
	}
	f.finish <- errSecond
	if err := <-resB; !errors.Is(err, errSecond) {
		t.Fatalf("B got %v, want the second sync's error", err)
	}
}

func TestGroupSyncSharesAndFansOutErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		waiters int
		err     error
	}{
		{"one waiter ok", 1, nil},
		{"sixteen waiters ok", 16, nil},
		{"one waiter fails", 1, errors.New("disk on fire")},
		{"sixteen waiters fail", 16, errors.New("disk on fire")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSyncs()
			g := startSyncer(t, f)
			// A holds sync 1 open while the others gather behind it.
			resA := make(chan error, 1)
			go func() { resA <- g.wait(context.Background(), false) }()
			<-f.started
			var res []<-chan error
			for range tc.waiters {
				res = append(res, goWait(t, g, context.Background()))
			}
			if got := g.gatheringWaiters(); got != tc.waiters {
				t.Fatalf("%d waiters gathered, want %d", got, tc.waiters)
			}
			f.finish <- nil
			if err := <-resA; err != nil {
				t.Fatal(err)
			}
			if n := <-f.started; n != 2 {
				t.Fatalf("sync %d started, want 2: one sync serves the whole batch", n)
			}
			f.finish <- tc.err
			for i, r := range res {
				if err := <-r; !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
					t.Fatalf("waiter %d got %v, want %v", i, err, tc.err)
				}
			}
			if f.n != 2 {
				t.Fatalf("%d syncs for %d waiters, want 2", f.n, tc.waiters+1)
			}
		})
	}
}

func TestGroupSyncCloseWakesWaiters(t *testing.T) {
	f := newFakeSyncs()
	g := newGroupSync(f.sync)
	stop := make(chan struct{})
	go g.run(stop)
	resA := make(chan error, 1)
	go func() { resA <- g.wait(context.Background(), false) }()
	<-f.started
	resB := goWait(t, g, context.Background())
	close(stop)
	// The gathering batch fails as soon as run sees stop, which it does
	// once the sync in progress ends; that sync still answers A.
	f.finish <- nil
	if err := <-resA; err != nil {
		t.Fatalf("A got %v, want its sync's result", err)
	}
	if err := <-resB; !errors.Is(err, ErrClosed) {
		t.Fatalf("B got %v, want ErrClosed", err)
	}
	<-g.done
	if err := g.wait(context.Background(), false); !errors.Is(err, ErrClosed) {
		t.Fatalf("wait after close: %v, want ErrClosed", err)
	}
	if f.n != 1 {
		t.Fatalf("%d syncs ran, want 1", f.n)
	}
}

func TestGroupSyncContext(t *testing.T) {
	f := newFakeSyncs()
	g := startSyncer(t, f)
	resA := make(chan error, 1)
	go func() { resA <- g.wait(context.Background(), false) }()
	<-f.started
	ctx, cancel := context.WithCancel(context.Background())
	resB := goWait(t, g, ctx)
	resC := goWait(t, g, context.Background())
	cancel()
	if err := <-resB; !errors.Is(err, context.Canceled) {
		t.Fatalf("B got %v, want context.Canceled", err)
	}
	f.finish <- nil
	<-resA
	<-f.started // B's batch is synced all the same, for C
	f.finish <- nil
	if err := <-resC; err != nil {
		t.Fatalf("C got %v", err)
	}
}

// TestSyncWritesSyncFailure checks that a Put under SyncWrites reports a
// failed sync instead of acknowledging, that nothing of an upload whose
// chunks could not be synced is visible, and that a retry of an entry stored
// but not synced answers only once a sync succeeded.
func TestSyncWritesSyncFailure(t *testing.T) {
	errDisk := errors.New("injected sync failure")
	for _, tc := range []struct {
		name    string
		size    int
		visible bool // the entry exists after the failed Put
	}{
		{"single chunk: committed, not yet durable", 1000, true},
		{"chunks not synced: nothing stored", 5*4096 + 7, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openInternal(t, Config{Dir: t.TempDir(), SyncWrites: true, ChunkSize: 4096})
			defer s.Close()
			real := s.syncer.sync
			s.syncer.mu.Lock() // the run goroutine reads sync after taking a batch
			s.syncer.sync = func() error { return errDisk }
			s.syncer.mu.Unlock()
			key, data := keyOf(tc.name), pattern(3, tc.size)
			_, err := s.Put(context.Background(), "default", key, bytes.NewReader(data), PutOptions{Size: int64(len(data))})
			if !errors.Is(err, errDisk) {
				t.Fatalf("Put: %v, want the sync failure", err)
			}
			if strings.Count(err.Error(), "put entry") != 1 {
				t.Fatalf("error %q repeats its prefix", err)
			}
			if _, err := s.Stat(context.Background(), "default", key); (err == nil) != tc.visible {
				t.Fatalf("Stat after the failed Put: %v, want visible=%v", err, tc.visible)
			}
			if !tc.visible && countChunks(t, s) != 0 {
				t.Fatal("the failed upload's chunks are left in the database")
			}
			s.syncer.mu.Lock()
			s.syncer.sync = real
			s.syncer.mu.Unlock()
			res, err := s.Put(context.Background(), "default", key, bytes.NewReader(data), PutOptions{Size: int64(len(data))})
			if err != nil || res.Created == tc.visible {
				t.Fatalf("retry: %+v, %v; want Created=%v", res, err, !tc.visible)
			}
		})
	}
}

// TestSyncWritesConcurrentPutsDurable runs concurrent Puts under SyncWrites,
// small (one chunk, stored with the metadata) and multi-chunk, closes the
// store and finds every acknowledged entry after reopening it.
func TestSyncWritesConcurrentPutsDurable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		size    int
		writers int
		each    int
	}{
		{"4 KiB entries, 8 writers", 4096, 8, 25},
		{"5-chunk entries, 4 writers", 5*4096 + 100, 4, 6},
		{"mixed sizes, 8 writers", 0, 8, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Dir: dir, SyncWrites: true, ChunkSize: 4096}
			s := openInternal(t, cfg)
			body := func(w, i int) []byte {
				n := tc.size
				if n == 0 {
					n = []int{100, 4096, 3*4096 + 1}[(w+i)%3]
				}
				return pattern(byte(w*tc.each+i), n)
			}
			errs := make(chan error, tc.writers)
			for w := range tc.writers {
				go func() {
					for i := range tc.each {
						data := body(w, i)
						key := keyOf(fmt.Sprint(tc.name, w, i))
						if _, err := s.Put(context.Background(), "default", key, bytes.NewReader(data), PutOptions{Size: int64(len(data))}); err != nil {
							errs <- err
							return
						}
					}
					errs <- nil
				}()
			}
			for range tc.writers {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if n := s.syncer.expected.Load(); n != 0 {
				t.Fatalf("%d Puts still announced to the syncer after all returned", n)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openInternal(t, cfg)
			defer s.Close()
			for w := range tc.writers {
				for i := range tc.each {
					got, err := readAll(s, "default", keyOf(fmt.Sprint(tc.name, w, i)), 0)
					if err != nil || !bytes.Equal(got, body(w, i)) {
						t.Fatalf("entry %d/%d after reopen: %d bytes, %v", w, i, len(got), err)
					}
				}
			}
			if u := s.Usage(); u.Entries != int64(tc.writers*tc.each) {
				t.Fatalf("%d entries after reopen, want %d", u.Entries, tc.writers*tc.each)
			}
		})
	}
}

// TestSyncWritesCloseFailsWaiters closes a SyncWrites store while Puts wait
// for their sync: every Put returns (stored and synced, or an error), and
// Close does not hang.
func TestSyncWritesCloseFailsWaiters(t *testing.T) {
	s := openInternal(t, Config{Dir: t.TempDir(), SyncWrites: true})
	release := make(chan struct{})
	s.syncer.mu.Lock()
	real := s.syncer.sync
	s.syncer.sync = func() error { <-release; return real() }
	s.syncer.mu.Unlock()
	const n = 6
	errs := make(chan error, n)
	for i := range n {
		go func() {
			data := pattern(byte(i), 2000)
			_, err := s.Put(context.Background(), "default", keyOf(fmt.Sprint("close", i)), bytes.NewReader(data), PutOptions{Size: int64(len(data))})
			errs <- err
		}()
	}
	for s.syncer.gatheringWaiters() == 0 {
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	close(release) // the sync in progress, if any, finishes; the rest fail
	for range n {
		if err := <-errs; err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("Put during Close: %v, want success or ErrClosed", err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// startPatientSyncer is startSyncer whose syncs wait for announced writers
// without a practical bound (an hour), so that no scheduling delay on a
// loaded machine can end a wait early.
func startPatientSyncer(t *testing.T, f *fakeSyncs) *groupSync {
	t.Helper()
	g := startSyncer(t, f)
	g.maxDelay = time.Hour
	g.lastSync.Store(int64(2 * time.Hour))
	return g
}

// goWaitAnnounced is goWait for a patient syncer with writers announced:
// no sync may start, and if one does (the syncer did not wait for them)
// the test fails instead of waiting for a batch the sync took.
func goWaitAnnounced(t *testing.T, g *groupSync, f *fakeSyncs) <-chan error {
	t.Helper()
	before := g.gatheringWaiters()
	res := make(chan error, 1)
	go func() { res <- g.wait(context.Background(), false) }()
	for g.gatheringWaiters() == before {
		select {
		case n := <-f.started:
			go func() { f.finish <- nil }()
			t.Fatalf("sync %d started while an announced writer was still expected", n)
		default:
			runtime.Gosched()
		}
	}
	return res
}

// assertNoSync fails the test if a sync starts while the syncer has many
// chances to run one (the sync is let finish, so the syncer can stop).
func assertNoSync(t *testing.T, f *fakeSyncs) {
	t.Helper()
	for range 1000 {
		runtime.Gosched()
	}
	select {
	case n := <-f.started:
		go func() { f.finish <- nil }()
		t.Fatalf("sync %d started while an announced writer was still expected", n)
	default:
	}
}

func TestGroupSyncWaitsForAnnouncedWriters(t *testing.T) {
	f := newFakeSyncs()
	g := startPatientSyncer(t, f)
	g.expect()
	g.expect()
	resA := goWaitAnnounced(t, g, f) // not announced: kicks the syncer
	assertNoSync(t, f)               // it waits for the two announced
	resB := make(chan error, 1)
	go func() { resB <- g.wait(context.Background(), true) }()
	assertNoSync(t, f) // one is still expected
	resC := make(chan error, 1)
	go func() { resC <- g.wait(context.Background(), true) }()
	if n := <-f.started; n != 1 {
		t.Fatalf("sync %d started, want 1", n)
	}
	errSync := errors.New("the one sync")
	f.finish <- errSync
	for name, res := range map[string]<-chan error{"A": resA, "B": resB, "C": resC} {
		if err := <-res; err != errSync {
			t.Errorf("waiter %s got %v, want the first sync's error", name, err)
		}
	}
	if n := g.expected.Load(); n != 0 {
		t.Errorf("%d writers still expected", n)
	}
}

func TestGroupSyncWithdrawnWriterReleasesSync(t *testing.T) {
	f := newFakeSyncs()
	g := startPatientSyncer(t, f)
	g.expect()
	res := goWaitAnnounced(t, g, f)
	assertNoSync(t, f)
	g.unexpect() // its Put failed before waiting
	if n := <-f.started; n != 1 {
		t.Fatalf("sync %d started, want 1", n)
	}
	f.finish <- nil
	if err := <-res; err != nil {
		t.Fatal(err)
	}
}

func TestGroupSyncWaitForAnnouncedIsBounded(t *testing.T) {
	f := newFakeSyncs()
	g := startSyncer(t, f) // maxGatherDelay: a millisecond at most
	g.lastSync.Store(int64(time.Hour))
	g.expect() // a writer that never comes nor withdraws
	res := make(chan error, 1)
	go func() { res <- g.wait(context.Background(), false) }()
	if n := <-f.started; n != 1 {
		t.Fatalf("sync %d started, want 1", n)
	}
	f.finish <- nil
	if err := <-res; err != nil {
		t.Fatal(err)
	}
}

func TestGroupSyncStopWhileWaitingForAnnounced(t *testing.T) {
	f := newFakeSyncs()
	g := newGroupSync(f.sync)
	g.maxDelay = time.Hour
	g.lastSync.Store(int64(2 * time.Hour))
	stop := make(chan struct{})
	go g.run(stop)
	g.expect()
	res := goWaitAnnounced(t, g, f)
	assertNoSync(t, f)
	close(stop)
	if err := <-res; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter got %v, want ErrClosed", err)
	}
	<-g.done
	select {
	case n := <-f.started:
		t.Fatalf("sync %d started after stop", n)
	default:
	}
}

// TestSyncWritesRacingPutsBalanceAnnouncements races Puts of one new key
// with different bytes under SyncWrites: one stores it, the others fail
// (some at their commit, after announcing their sync), and no announcement
// is left behind for the syncer to wait on.
func TestSyncWritesRacingPutsBalanceAnnouncements(t *testing.T) {
	s := openInternal(t, Config{Dir: t.TempDir(), SyncWrites: true})
	defer s.Close()
	for round := range 20 {
		key := keyOf(fmt.Sprint("race", round))
		const n = 6
		start := make(chan struct{})
		results := make(chan error, n)
		for i := range n {
			go func() {
				data := pattern(byte(i), 3000)
				<-start
				_, err := s.Put(context.Background(), "default", key, bytes.NewReader(data), PutOptions{Size: int64(len(data))})
				results <- err
			}()
		}
		close(start)
		stored := 0
		for range n {
			err := <-results
			switch {
			case err == nil:
				stored++
			case !errors.Is(err, ErrConflict):
				t.Fatalf("round %d: %v, want success or ErrConflict", round, err)
			}
		}
		if stored != 1 {
			t.Fatalf("round %d: %d Puts stored the key, want 1", round, stored)
		}
		if e := s.syncer.expected.Load(); e != 0 {
			t.Fatalf("round %d: %d announcements left behind", round, e)
		}
	}
}

// TestGroupSyncLoneAnnouncedWriter: a writer that announced itself and
// then waits is no longer expected, so its sync starts at once even when
// the syncer would wait an hour for announced writers (c=1 pays no delay).
func TestGroupSyncLoneAnnouncedWriter(t *testing.T) {
	f := newFakeSyncs()
	g := startPatientSyncer(t, f)
	for i := 1; i <= 3; i++ {
		g.expect()
		res := make(chan error, 1)
		go func() { res <- g.wait(context.Background(), true) }()
		if n := <-f.started; n != i {
			t.Fatalf("sync %d started, want %d", n, i)
		}
		f.finish <- nil
		if err := <-res; err != nil {
			t.Fatal(err)
		}
	}
}
