package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMFinishesOrDiscardsUploads sends SIGTERM to `cachesvc serve`
// while two uploads are in flight: one that completes within the grace
// period (acknowledged and kept) and one that stalls past it (aborted,
// nothing stored). The server exits 0 and the store reopens cleanly.
func TestSIGTERMFinishesOrDiscardsUploads(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess test skipped in -short mode")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startServer(t, bin, data, "--shutdown-grace", "2s")
	finishing := fmt.Sprintf("%064x", 1)
	stalled := fmt.Sprintf("%064x", 2)

	type result struct {
		status int
		err    error
	}
	start := func(key string) (*io.PipeWriter, chan result) {
		pr, pw := io.Pipe()
		ch := make(chan result, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodPut, p.url+"/v1/default/entries/"+key, pr)
			req.ContentLength = 2 << 20
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				ch <- result{err: err}
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ch <- result{status: resp.StatusCode}
		}()
		if _, err := pw.Write(make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
		return pw, ch
	}
	pwDone, done := start(finishing)
	pwStall, stall := start(stalled)
	// Both handlers must be reading their bodies before the SIGTERM: a
	// connection whose request the server has not read yet is idle to
	// the shutdown, which closes it (the client then sees its body pipe
	// closed, a flake under load).
	for metricSum(t, p, "cachesvc_bytes_in_total") < 2<<20 {
		time.Sleep(10 * time.Millisecond)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let the signal land; not a correctness timing
	// Finish the first upload within the grace period.
	if _, err := pwDone.Write(make([]byte, 1<<20)); err != nil {
		t.Fatalf("finish upload: %v", err)
	}
	pwDone.Close()
	if r := <-done; r.err != nil || r.status != http.StatusCreated {
		t.Errorf("upload finished during the grace period: %d, %v; want 201", r.status, r.err)
	}
	// The stalled one is aborted when the grace period ends.
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("server did not exit after SIGTERM")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM:\n%s", code, p.stderr.String())
	}
	pwStall.CloseWithError(io.ErrClosedPipe)
	if r := <-stall; r.err == nil && r.status/100 == 2 {
		t.Errorf("stalled upload was acknowledged: %d", r.status)
	}

	p = startServer(t, bin, data)
	if status, _ := getSum(t, p.url+"/v1/default/entries/"+finishing); status != 200 {
		t.Errorf("finished upload after restart: %d, want 200", status)
	}
	if status, _ := getSum(t, p.url+"/v1/default/entries/"+stalled); status != 404 {
		t.Errorf("aborted upload after restart: %d, want 404", status)
	}
	p.stop(t, 30*time.Second)
}

// TestSIGTERMShutdownDelay sends SIGTERM to `cachesvc serve
// --shutdown-delay`: during the delay the server still answers every
// request on new connections (a load balancer may still route there), with
// /readyz 503 shutting_down and /healthz 200; a second SIGTERM ends the
// delay, and the server exits 0 with the upload made meanwhile kept.
// Without the delay SIGTERM closed the listener at once: probes and
// requests alike were refused.
func TestSIGTERMShutdownDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess test skipped in -short mode")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	// Long enough that nothing below races it; the second SIGTERM ends it.
	p := startServer(t, bin, data, "--shutdown-delay", "5m", "--log-level", "info")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // a new connection each time
	get := func(path string) (int, string) {
		resp, err := client.Get(p.url + path)
		if err != nil {
			t.Fatalf("GET %s during the shutdown delay: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for status, _ := get("/readyz"); status != http.StatusOK; status, _ = get("/readyz") {
		time.Sleep(10 * time.Millisecond) // the built-in plugins are loading
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Wait (without a deadline of our own) for the signal to be handled.
	for !strings.Contains(p.stderr.String(), "draining") {
		select {
		case <-p.exited:
			t.Fatalf("serve exited during its shutdown delay:\n%s", p.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if status, body := get("/readyz"); status != http.StatusServiceUnavailable || !strings.Contains(body, "shutting_down") {
		t.Errorf("/readyz during the shutdown delay: %d %s, want 503 shutting_down", status, body)
	}
	if status, _ := get("/healthz"); status != http.StatusOK {
		t.Errorf("/healthz during the shutdown delay: %d, want 200", status)
	}
	key := fmt.Sprintf("%064x", 7)
	req, _ := http.NewRequest(http.MethodPut, p.url+"/v1/default/entries/"+key, strings.NewReader("exe"))
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT during the shutdown delay: %v %v, want 201", resp, err)
	}
	resp.Body.Close()

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("a second SIGTERM did not end the shutdown delay")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM:\n%s", code, p.stderr.String())
	}
	p = startServer(t, bin, data)
	if status, _ := getSum(t, p.url+"/v1/default/entries/"+key); status != 200 {
		t.Errorf("upload made during the shutdown delay, after restart: %d, want 200", status)
	}
	p.stop(t, 30*time.Second)
}

// TestSecondSignalCutsTheGraceShort holds an upload open past SIGTERM under
// a grace of ten minutes: a second SIGTERM must abort it and end serve at
// once (exit 0, a requested stop), storing nothing of the upload. Before,
// the second signal was ignored and serve waited out the whole grace.
func TestSecondSignalCutsTheGraceShort(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess test skipped in -short mode")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startServer(t, bin, data, "--shutdown-grace", "10m", "--log-level", "info")
	key := fmt.Sprintf("%064x", 9)
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers and half the body: the upload stays in flight.
	fmt.Fprintf(conn, "PUT /v1/default/entries/%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", key, 2<<20)
	if _, err := conn.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	for metricSum(t, p, "cachesvc_bytes_in_total") < 1<<20 {
		select { // until the handler is reading the body
		case <-p.exited:
			t.Fatalf("serve exited:\n%s", p.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(p.stderr.String(), `"shutting down"`) {
		select {
		case <-p.exited:
			t.Fatalf("serve exited on the first SIGTERM with an upload in flight under a 10m grace:\n%s", p.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(2 * time.Minute): // far below the 10m grace
		t.Fatalf("a second SIGTERM did not cut the grace short:\n%s", p.stderr.String())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0 (a requested stop):\n%s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "shutdown grace cut short by a second signal") {
		t.Errorf("the log does not say the grace was cut short:\n%s", p.stderr.String())
	}
	p = startServer(t, bin, data)
	if status, _ := getSum(t, p.url+"/v1/default/entries/"+key); status != http.StatusNotFound {
		t.Errorf("the aborted upload after restart: %d, want 404", status)
	}
	p.stop(t, 30*time.Second)
}
