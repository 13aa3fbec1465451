package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestGetWaitSlicesCountOneMiss: Get with a wait after the caller's own
// miss, against a real server, sent as slices (Config.WaitSlice, or kept
// under Config.StallTimeout so that a parked slice does not read as a
// stall). However many slices the wait takes, the server counts the one
// miss of the plain Get before it, and one wait hit when the entry comes:
// misses minus wait hits stays the compiles run.
func TestGetWaitSlicesCountOneMiss(t *testing.T) {
	tests := []struct {
		name string
		cfg  client.Config
		wait time.Duration
		// after is how long the holder compiles once the waiter parked;
		// then it writes the entry (write) or releases its lease, or does
		// neither (hold) and the wait runs out.
		after       time.Duration
		write, hold bool
		code        string   // the wait's *client.Error code; "" for a hit
		totals      [4]int64 // lookups, hits, misses, wait hits
	}{
		{"the entry comes in the third slice", client.Config{WaitSlice: time.Second}, 10 * time.Second,
			2500 * time.Millisecond, true, false, "", [4]int64{2, 1, 1, 1}},
		{"the lease ends in the second slice", client.Config{WaitSlice: time.Second}, 10 * time.Second,
			1500 * time.Millisecond, false, false, "not_found", [4]int64{1, 0, 1, 0}},
		{"the wait runs out after three slices", client.Config{WaitSlice: time.Second}, 2500 * time.Millisecond,
			0, false, true, "wait_timeout", [4]int64{1, 0, 1, 0}},
		// Before, the default 50 s slice parked silent past the stall
		// timeout and the wait failed with ErrStalled (after 4 s: the
		// transport retries a GET whose reused connection failed once).
		{"a stall timeout shorter than the slice", client.Config{StallTimeout: 2 * time.Second}, 10 * time.Second,
			5 * time.Second, true, false, "", [4]int64{2, 1, 1, 1}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := statstest.Start(t, nil)
			ctx := context.Background()
			holder, err := client.New(client.Config{BaseURL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			cfg := tt.cfg
			cfg.BaseURL = srv.URL
			waiter, err := client.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			key := strings.Repeat(string(rune('a'+i)), 64)
			if _, err := waiter.Get(ctx, "default", key, 0); !client.IsNotFound(err) {
				t.Fatalf("first lookup: %v, want a 404 miss", err)
			}
			if _, ok, err := holder.AcquireLease(ctx, "default", key, "holder", time.Minute); err != nil || !ok {
				t.Fatalf("acquire: granted %v, %v", ok, err)
			}
			done := make(chan error, 1)
			go func() {
				for {
					if _, w := srv.API.LeaseCounts(); w == 1 {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				time.Sleep(tt.after) // the holder compiles
				switch {
				case tt.hold:
					done <- nil
				case tt.write:
					body := []byte("executable")
					_, err := holder.Put(ctx, "default", key, bytes.NewReader(body), client.PutOptions{Size: int64(len(body)), CompileSeconds: 100})
					done <- err
				default:
					done <- holder.ReleaseLease(ctx, "default", key, "holder")
				}
			}()
			resp, err := waiter.Get(ctx, "default", key, tt.wait)
			if herr := <-done; herr != nil {
				t.Fatalf("holder: %v", herr)
			}
			var ce *client.Error
			switch {
			case tt.code == "" && err != nil:
				t.Fatalf("Get with a %s wait: %v, want the entry", tt.wait, err)
			case tt.code == "":
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "executable" {
					t.Fatalf("got %q", b)
				}
			case err == nil:
				resp.Body.Close()
				t.Fatalf("Get with a %s wait got an entry, want 404 %s", tt.wait, tt.code)
			case !errors.As(err, &ce) || ce.Status != http.StatusNotFound || ce.Code != tt.code:
				t.Fatalf("Get with a %s wait: %v, want 404 %s", tt.wait, err, tt.code)
			}
			if got := totals(t, srv.URL); got != tt.totals {
				t.Errorf("totals: lookups, hits, misses, wait hits = %v, want %v", got, tt.totals)
			}
		})
	}
}

// totals reads the server's lookups, hits, misses and wait hits.
func totals(t *testing.T, base string) [4]int64 {
	t.Helper()
	resp, err := http.Get(base + "/v1/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s wire.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return [4]int64{s.Totals.Lookups, s.Totals.Hits, s.Totals.Misses, s.Totals.WaitHits}
}

// TestAcquireLeaseSaysWhyRefused: a refused lease names its reason as the
// Python client's Lease.code does: lease_held (wait for the holder's
// entry) or entry_exists (written since the caller's miss: fetch it with a
// wait, answered at once, so that its hit counts as answering the miss
// and misses minus wait hits stays the compiles run).
func TestAcquireLeaseSaysWhyRefused(t *testing.T) {
	srv := statstest.Start(t, nil)
	ctx := context.Background()
	c, err := client.New(client.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	held, written := strings.Repeat("1", 64), strings.Repeat("2", 64)
	for _, k := range []string{held, written} {
		if _, err := c.Get(ctx, "default", k, 0); !client.IsNotFound(err) {
			t.Fatalf("first lookup: %v, want a 404 miss", err)
		}
	}
	if _, ok, err := c.AcquireLease(ctx, "default", held, "holder", time.Minute); err != nil || !ok {
		t.Fatalf("acquire: granted %v, %v", ok, err)
	}
	body := []byte("executable")
	if _, err := c.Put(ctx, "default", written, bytes.NewReader(body), client.PutOptions{Size: int64(len(body)), CompileSeconds: 10}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key, code, holder string
	}{
		{held, "lease_held", "holder"},
		{written, "entry_exists", ""},
	}
	for _, tt := range tests {
		l, ok, err := c.AcquireLease(ctx, "default", tt.key, "waiter", time.Minute)
		if err != nil || ok || l.Code != tt.code || l.Holder != tt.holder {
			t.Fatalf("acquire %s: %+v granted %v, %v; want refused, code %q, holder %q", tt.code, l, ok, err, tt.code, tt.holder)
		}
	}
	resp, err := c.Get(ctx, "default", written, time.Minute)
	if err != nil {
		t.Fatalf("fetch after entry_exists: %v", err)
	}
	resp.Body.Close()
	if got, want := totals(t, srv.URL), [4]int64{3, 1, 2, 1}; got != want {
		t.Errorf("totals: lookups, hits, misses, wait hits = %v, want %v", got, want)
	}
}
