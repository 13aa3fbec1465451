package client_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/stats/statstest"
)

// TestLeaseOneHolderManyGoroutines: goroutines of one process share its
// holder id (holders name a process), so the server renews rather than
// refuses the lease for the second asker; AcquireLease must still grant it
// to one of them only, the others waiting for its entry, as the Python
// Lease does. Every goroutine asks before the one granted writes (no
// timing), so a renewal read as a grant would compile more than once.
func TestLeaseOneHolderManyGoroutines(t *testing.T) {
	srv := statstest.Start(t, nil)
	ctx := context.Background()
	c, err := client.New(client.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines = 8
	key, holder, exe := strings.Repeat("c", 64), "host:1", []byte("executable")
	var compiles, renewals atomic.Int64
	var asked, done sync.WaitGroup
	asked.Add(goroutines)
	errs := make(chan error, goroutines)
	for range goroutines {
		done.Add(1)
		go func() {
			defer done.Done()
			errs <- func() error {
				if _, err := c.Get(ctx, "default", key, 0); !client.IsNotFound(err) {
					asked.Done()
					return err
				}
				l, granted, err := c.AcquireLease(ctx, "default", key, holder, time.Minute)
				asked.Done()
				if err != nil {
					return err
				}
				if granted {
					compiles.Add(1)
					asked.Wait() // every other goroutine has asked: none can see entry_exists
					_, err := c.Put(ctx, "default", key, bytes.NewReader(exe), client.PutOptions{Size: int64(len(exe)), CompileSeconds: 10})
					return err
				}
				if l.Renewed {
					renewals.Add(1)
				}
				if l.Code != "lease_held" || l.Holder != holder {
					t.Errorf("not granted: %+v, want code lease_held naming holder %q", l, holder)
				}
				resp, err := c.Get(ctx, "default", key, time.Minute)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				if b, err := io.ReadAll(resp.Body); err != nil || !bytes.Equal(b, exe) {
					t.Errorf("waited for %q, %v; want %q", b, err, exe)
				}
				return nil
			}()
		}()
	}
	done.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := compiles.Load(); got != 1 {
		t.Errorf("compiles: got %d, want 1 (one holder, %d goroutines)", got, goroutines)
	}
	if got := renewals.Load(); got != goroutines-1 {
		t.Errorf("renewals seen by the goroutines that wait: got %d, want %d", got, goroutines-1)
	}
}

// TestRenewLease: the goroutine that took a lease extends it with
// RenewLease, granted while it holds it; a second AcquireLease by the same
// holder is not granted (another goroutine compiles), and neither is a
// renewal by another holder or after the entry is written.
func TestRenewLease(t *testing.T) {
	srv := statstest.Start(t, nil)
	ctx := context.Background()
	c, err := client.New(client.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	key, exe := strings.Repeat("d", 64), []byte("executable")
	type post func(context.Context, string, string, string, time.Duration) (client.Lease, bool, error)
	tests := []struct {
		name    string
		post    post
		holder  string
		granted bool
		renewed bool
		code    string
	}{
		{"first ask", c.AcquireLease, "host:1", true, false, ""},
		{"its renewal", c.RenewLease, "host:1", true, true, ""},
		{"another goroutine of the holder", c.AcquireLease, "host:1", false, true, "lease_held"},
		{"another holder's renewal", c.RenewLease, "host:2", false, false, "lease_held"},
		{"another holder", c.AcquireLease, "host:2", false, false, "lease_held"},
		{"a renewal after the entry is written", c.RenewLease, "host:1", false, false, "entry_exists"},
	}
	for _, tt := range tests {
		if tt.code == "entry_exists" {
			if _, err := c.Put(ctx, "default", key, bytes.NewReader(exe), client.PutOptions{Size: int64(len(exe))}); err != nil {
				t.Fatal(err)
			}
		}
		l, granted, err := tt.post(ctx, "default", key, tt.holder, time.Minute)
		if err != nil || granted != tt.granted || l.Renewed != tt.renewed || l.Code != tt.code {
			t.Errorf("%s: %+v granted %v, %v; want granted %v, renewed %v, code %q", tt.name, l, granted, err, tt.granted, tt.renewed, tt.code)
		}
	}
}
