package limit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// pacePair returns a PaceConn server side and the plain client side of a
// loopback TCP connection.
func pacePair(t testing.TB, minRate int64) (*PaceConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pl := PaceListener(ln, 0, minRate)
	var srv net.Conn
	var aerr error
	done := make(chan struct{})
	go func() { srv, aerr = pl.Accept(); close(done) }()
	cli, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if aerr != nil {
		t.Fatal(aerr)
	}
	t.Cleanup(func() { srv.Close(); cli.Close() })
	return srv.(*PaceConn), cli
}

func TestPaceConnRead(t *testing.T) {
	const base = time.Second
	tests := []struct {
		name     string
		chunk    int
		every    time.Duration
		total    time.Duration
		wantFail bool
	}{
		// 10 KiB every 10 ms is ~1 MiB/s, 100x the minimum: never cut,
		// though the transfer lasts three times the base timeout.
		{"fast", 10 << 10, 10 * time.Millisecond, 3 * base, false},
		// 1 byte every 50 ms is a slow-loris: cut soon after base.
		{"slowloris", 1, 50 * time.Millisecond, 20 * base, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := pacePair(t, 10<<10)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, tc.chunk)
				for {
					select {
					case <-stop:
						return
					case <-time.After(tc.every):
					}
					if _, err := cli.Write(buf); err != nil {
						return
					}
				}
			}()
			srv.SetReadDeadline(time.Now().Add(base))
			start := time.Now()
			buf := make([]byte, 64<<10)
			var err error
			for time.Since(start) < tc.total {
				if _, err = srv.Read(buf); err != nil {
					break
				}
			}
			close(stop)
			cli.Close()
			wg.Wait()
			if tc.wantFail {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("slow client not cut off: err = %v after %v", err, time.Since(start))
				}
			} else if err != nil {
				t.Fatalf("fast client cut off after %v: %v", time.Since(start), err)
			}
		})
	}
}

func TestPaceConnWriteSlowReader(t *testing.T) {
	srv, cli := pacePair(t, 1<<20)
	// Small socket buffers, so that what the kernel absorbs from a client
	// that never reads earns little time.
	srv.NetConn().(*net.TCPConn).SetWriteBuffer(32 << 10)
	cli.(*net.TCPConn).SetReadBuffer(32 << 10)
	srv.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 16<<10)
	var err error
	start := time.Now()
	for i := 0; i < 1000 && err == nil; i++ {
		_, err = srv.Write(buf)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writes to a client that never reads: err = %v after %v", err, time.Since(start))
	}
}

func TestPaceConnWriteFastReader(t *testing.T) {
	srv, cli := pacePair(t, 1<<20)
	go io.Copy(io.Discard, cli)
	srv.SetWriteDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 256<<10)
	start := time.Now()
	// 64 MiB: far more than 1 s at the 1 MiB/s minimum would allow
	// without pacing; loopback moves it at hundreds of MiB/s.
	for i := 0; i < 256; i++ {
		if _, err := srv.Write(buf); err != nil {
			t.Fatalf("write %d after %v: %v", i, time.Since(start), err)
		}
	}
}

func TestPaceConnClear(t *testing.T) {
	srv, cli := pacePair(t, 1<<20)
	srv.SetReadDeadline(time.Now().Add(time.Millisecond))
	srv.SetReadDeadline(time.Time{})
	go func() { time.Sleep(50 * time.Millisecond); cli.Write([]byte("x")) }()
	if _, err := srv.Read(make([]byte, 1)); err != nil {
		t.Fatalf("read after clearing the deadline: %v", err)
	}
	if srv.NetConn() == nil {
		t.Fatal("NetConn is nil")
	}
}

func TestRates(t *testing.T) {
	r := NewRates(1, 3, 2)
	for i := 0; i < 3; i++ {
		if ok, _ := r.Allow("a"); !ok {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	ok, wait := r.Allow("a")
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("4th request: ok=%v wait=%v; want refused with wait in (0, 1s]", ok, wait)
	}
	if ok, _ := r.Allow("b"); !ok {
		t.Fatal("other key limited")
	}
	// Full of non-idle buckets: a third key is refused rather than growing
	// the map.
	r.Allow("b")
	if ok, _ := r.Allow("c"); ok {
		t.Fatal("third key admitted past maxKeys with no idle bucket")
	}
	if ok, _ := NewRates(0, 0, 0).Allow("x"); !ok {
		t.Fatal("unlimited rates refused")
	}
	var nilRates *Rates
	if ok, _ := nilRates.Allow("x"); !ok {
		t.Fatal("nil rates refused")
	}
}

// fakeClock sets r's clock to one that only advance moves.
func fakeClock(r *Rates) (advance func(time.Duration)) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	return func(d time.Duration) { now = now.Add(d) }
}

func TestRatesEvictIdle(t *testing.T) {
	r := NewRates(1000, 1, 1)
	advance := fakeClock(r)
	r.Allow("a")
	if ok, _ := r.Allow("b"); ok {
		t.Fatal("new key admitted while the only bucket is in use")
	}
	advance(time.Millisecond) // "a" refills (1 token at 1000/s)
	if ok, _ := r.Allow("b"); !ok {
		t.Fatal("idle bucket not evicted for a new key")
	}
}

// TestRatesFullTableRefusesUntilABucketRefills: with every bucket in use,
// each new key is refused, and a bucket that has refilled since makes room
// again. That the refusals do not each scan the table for an idle bucket
// (it took ~250 µs for 10,000 buckets, under the lock every request takes)
// is a matter of cost alone: BenchmarkRatesFullTableNewKey shows it.
func TestRatesFullTableRefusesUntilABucketRefills(t *testing.T) {
	r := NewRates(4, 1, 1000) // a bucket refills in 250 ms
	advance := fakeClock(r)
	for i := range 1000 {
		r.Allow(fmt.Sprint("busy", i))
	}
	for i := range 1000 {
		if ok, _ := r.Allow(fmt.Sprint("new", i)); ok {
			t.Fatalf("new key %d admitted to a table full of buckets in use", i)
		}
	}
	advance(249 * time.Millisecond)
	if ok, _ := r.Allow("later"); ok {
		t.Fatal("new key admitted before any bucket refilled")
	}
	advance(time.Millisecond)
	if ok, _ := r.Allow("later"); !ok {
		t.Fatal("new key refused once the buckets refilled")
	}
}

func TestGate(t *testing.T) {
	g := NewGate(2)
	if !g.TryEnter() || !g.TryEnter() {
		t.Fatal("gate refused within capacity")
	}
	if g.TryEnter() {
		t.Fatal("gate admitted past capacity")
	}
	if g.InUse() != 2 {
		t.Fatalf("InUse = %d", g.InUse())
	}
	g.Leave()
	if !g.TryEnter() {
		t.Fatal("gate refused after Leave")
	}
	for _, open := range []*Gate{nil, NewGate(0)} {
		if !open.TryEnter() {
			t.Fatal("unlimited gate refused")
		}
		open.Leave()
	}
}

func TestGateConcurrent(t *testing.T) {
	g := NewGate(4)
	var mu sync.Mutex
	in, peak := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				if !g.TryEnter() {
					continue
				}
				mu.Lock()
				in++
				peak = max(peak, in)
				mu.Unlock()
				mu.Lock()
				in--
				mu.Unlock()
				g.Leave()
			}
		}()
	}
	wg.Wait()
	if peak > 4 || g.InUse() != 0 {
		t.Fatalf("peak %d, in use %d", peak, g.InUse())
	}
}

// deadlineCounter counts the deadlines set on a real connection.
type deadlineCounter struct {
	net.Conn
	reads, writes int
}

func (d *deadlineCounter) SetReadDeadline(t time.Time) error {
	d.reads++
	return d.Conn.SetReadDeadline(t)
}

func (d *deadlineCounter) SetWriteDeadline(t time.Time) error {
	d.writes++
	return d.Conn.SetWriteDeadline(t)
}

// countedPacePair is pacePair with the server side's deadline updates
// counted.
func countedPacePair(t *testing.T, minRate int64) (*PaceConn, *deadlineCounter, net.Conn) {
	t.Helper()
	srv, cli := pacePair(t, minRate)
	dc := &deadlineCounter{Conn: srv.NetConn()}
	return NewPaceConn(dc, 0, minRate), dc, cli
}

// TestPaceConnKeepAliveArmsOnce replays what the HTTP server does per
// keep-alive request (an idle phase, a header phase, a read, a write
// phase, a write): the timers are set once per direction, not per request.
func TestPaceConnKeepAliveArmsOnce(t *testing.T) {
	srv, dc, cli := countedPacePair(t, 64<<10)
	req, resp, got := []byte("GET /x HTTP/1.1\r\n\r\n"), make([]byte, 4096), make([]byte, 4096)
	buf := make([]byte, 64)
	for i := 0; i < 200; i++ {
		if _, err := cli.Write(req); err != nil {
			t.Fatal(err)
		}
		srv.SetReadDeadline(time.Now().Add(2 * time.Minute))
		srv.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(srv, buf[:len(req)]); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		srv.SetWriteDeadline(time.Now().Add(30 * time.Second))
		werr := make(chan error, 1)
		go func() { _, err := srv.Write(resp); werr <- err }()
		if _, err := io.ReadFull(cli, got); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if err := <-werr; err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
	}
	if dc.reads > 2 || dc.writes > 2 {
		t.Fatalf("200 requests set %d read and %d write deadlines; want at most 2 each", dc.reads, dc.writes)
	}
}

// TestPaceConnResumesEarlyDeadline: a later phase does not move the
// connection's deadline, so the earlier one fires; the read goes on until
// the phase's own deadline, and fails only then.
func TestPaceConnResumesEarlyDeadline(t *testing.T) {
	srv, dc, cli := countedPacePair(t, 1<<20)
	srv.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	srv.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	go func() { time.Sleep(100 * time.Millisecond); cli.Write([]byte("x")) }()
	if _, err := srv.Read(make([]byte, 1)); err != nil {
		t.Fatalf("read before the phase's deadline: %v", err)
	}
	if dc.reads < 2 {
		t.Fatalf("the early deadline did not fire and resume (%d deadlines set)", dc.reads)
	}
	start := time.Now()
	srv.SetReadDeadline(start.Add(20 * time.Millisecond))
	srv.SetReadDeadline(start.Add(200 * time.Millisecond))
	_, err := srv.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the phase's deadline: err = %v", err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("the read failed after %v, before its phase's deadline (200ms)", waited)
	}
}

// TestPaceConnResumesWrite: a write stopped by the earlier deadline of a
// previous phase goes on, and writes everything.
func TestPaceConnResumesWrite(t *testing.T) {
	srv, dc, cli := countedPacePair(t, 1<<20)
	dc.Conn.(*net.TCPConn).SetWriteBuffer(16 << 10)
	cli.(*net.TCPConn).SetReadBuffer(16 << 10)
	srv.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	srv.SetWriteDeadline(time.Now().Add(10 * time.Second))
	got := make(chan int64, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		n, _ := io.Copy(io.Discard, cli)
		got <- n
	}()
	body := make([]byte, 4<<20)
	n, err := srv.Write(body)
	if err != nil || n != len(body) {
		t.Fatalf("write = %d, %v; want %d, nil", n, err, len(body))
	}
	if dc.writes < 2 {
		t.Fatalf("the early deadline did not fire and resume (%d deadlines set)", dc.writes)
	}
	srv.Close()
	if n := <-got; n != int64(len(body)) {
		t.Fatalf("client read %d bytes, want %d", n, len(body))
	}
}

// TestPaceConnDeadlineNowStops: a deadline of now (a forced shutdown)
// stops a read blocked under a long phase at once.
func TestPaceConnDeadlineNowStops(t *testing.T) {
	srv, _, _ := countedPacePair(t, 1<<20)
	srv.SetDeadline(time.Now().Add(time.Minute))
	errc := make(chan error, 1)
	go func() {
		_, err := srv.Read(make([]byte, 1))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	srv.SetDeadline(time.Now())
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read after SetDeadline(now): err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SetDeadline(now) did not stop a blocked read")
	}
}

// TestPaceConnClearedPhaseResumes: a cleared phase leaves the old deadline
// set until it fires; a read it stops goes on without a deadline.
func TestPaceConnClearedPhaseResumes(t *testing.T) {
	srv, _, cli := countedPacePair(t, 1<<20)
	srv.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	srv.SetReadDeadline(time.Time{})
	go func() { time.Sleep(100 * time.Millisecond); cli.Write([]byte("x")) }()
	if _, err := srv.Read(make([]byte, 1)); err != nil {
		t.Fatalf("read after clearing the phase: %v", err)
	}
}
