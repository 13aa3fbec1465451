package main

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store"
)

// TestServeStatsCloseHangs: the statistics' Close hangs at exit (as on a
// stuck fsync or lock, made here through closeStats) and the store, which
// closes after them, must close anyway: serve gives the statistics
// statsCloseWait, names them as not closed with what is lost, and closes
// the store, so that a second open of --data finds it free. Before, the
// store waited behind the statistics until --shutdown-grace + closeMargin
// ran out and was never closed: "not closed by the end of --shutdown-grace
// + 5s: statistics ...; store ...", and Badger's lock on --data was still
// held.
func TestServeStatsCloseHangs(t *testing.T) {
	release := make(chan struct{})
	orig := closeStats
	closeStats = func(s *stats.Stats) error {
		<-release
		return orig(s)
	}
	t.Cleanup(func() { closeStats = orig })
	data := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data", data, "--log-format", "json", "--shutdown-grace", "1s"},
			strings.NewReader(""), &stdout, &stderr)
	}()
	url := waitURL(t, &stdout, exited)
	key := strings.Repeat("ab", 32)
	req, _ := http.NewRequest(http.MethodPut, url+"/v1/default/entries/"+key, strings.NewReader("entry"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d, want 201:\n%s", resp.StatusCode, stderr.String())
	}

	cancel()
	code := <-exited
	// The hung Close ends with the test: it returns, into a store that
	// has closed, as it would in a process about to exit.
	defer close(release)
	errOut := stderr.String()
	if code != 1 {
		t.Errorf("exit %d, want 1: the statistics since their last save are lost", code)
	}
	if testing.Verbose() {
		t.Log(stderr.String())
	}
	statsDir := filepath.Join(data, "stats")
	for _, want := range []string{
		"not closed (its close did not return in time and was left running, so that the store behind it could close): statistics " +
			statsDir + " (counters since their last save, at most " + stats.DefaultFlushInterval.String() + ") after " + statsCloseWait.String(),
		`"msg":"store closed"`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if notClosed := "store " + data + " ("; strings.Contains(errOut, notClosed) {
		t.Errorf("the store was not closed behind the hung statistics:\n%s", errOut)
	}
	st, err := store.Open(store.Config{Dir: data, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open --data again after serve exited: %v", err)
	}
	defer st.Close()
	k, err := cachekey.ParseKey(key)
	if err != nil {
		t.Fatal(err)
	}
	_, rc, err := st.Get(context.Background(), "default", k, 0, -1)
	if err != nil {
		t.Fatalf("the entry stored before the exit: %v", err)
	}
	rc.Close()
}
