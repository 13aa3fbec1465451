package api_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestLeaseShortRenewalKeepsTheLease: two threads of one process (one
// holder): the first takes the lease for a long compile, the second asks with
// a shorter ttl_s and is told the process holds it ("renewed"). The lease
// keeps its later expiry, so that another process is not granted it (and
// does not compile the key a second time) once the short TTL has passed.
func TestLeaseShortRenewalKeepsTheLease(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	ctx := context.Background()
	key := testKey(48)
	first, granted, err := c.AcquireLease(ctx, "default", key, "host:1", time.Hour)
	if err != nil || !granted {
		t.Fatalf("first thread: granted=%v err=%v", granted, err)
	}
	second, granted, err := c.AcquireLease(ctx, "default", key, "host:1", time.Second)
	if err != nil || granted || !second.Renewed {
		t.Fatalf("second thread: granted=%v renewed=%v err=%v, want a renewal, not granted (the first thread compiles)", granted, second.Renewed, err)
	}
	if second.Expires.Before(first.Expires) {
		t.Fatalf("the second thread's 1 s renewal moved the lease's expiry from %v to %v", first.Expires, second.Expires)
	}
	other, granted, err := c.AcquireLease(ctx, "default", key, "host:2", time.Minute)
	if err != nil || granted || other.Holder != "host:1" || other.Expires.Before(first.Expires) {
		t.Fatalf("another process: granted=%v holder=%q expires=%v err=%v, want host:1's lease until %v", granted, other.Holder, other.Expires, err, first.Expires)
	}
}

// TestLeaseAnswerTTLIsGranted: a 201's ttl_s is the duration the lease was
// granted for, so that it agrees with expires: the ttl_s asked for on a new
// lease or a renewal that moves the expiry later, and what is left of the
// lease when a renewal asked for less and kept its later expiry. Before,
// ttl_s echoed the 1 s asked for beside an expiry an hour away.
func TestLeaseAnswerTTLIsGranted(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	url := srv.URL + "/v1/default/leases/" + testKey(49)
	tests := []struct {
		name     string
		ttl      float64
		renewed  bool
		min, max float64 // the ttl_s answered
	}{
		{"new lease", 3600, false, 3600, 3600},
		{"renewal asking for less keeps the later expiry", 1, true, 3590, 3600},
		{"fractional renewal asking for less", 0.25, true, 3590, 3600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"holder":"host:1","ttl_s":` + strconv.FormatFloat(tt.ttl, 'g', -1, 64) + `}`
			resp := srv.Do(http.MethodPost, url, strings.NewReader(body), "Content-Type", "application/json")
			b := apitest.ReadAll(t, resp)
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("POST %s: %d %s", body, resp.StatusCode, b)
			}
			var got wire.LeaseResponse
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.Renewed != tt.renewed || got.TTL < tt.min || got.TTL > tt.max {
				t.Fatalf("ttl_s %v: got ttl_s %v renewed %v (expires %v), want ttl_s in [%v, %v] renewed %v",
					tt.ttl, got.TTL, got.Renewed, got.Expires, tt.min, tt.max, tt.renewed)
			}
			if left := time.Until(got.Expires).Seconds(); math.Abs(left-got.TTL) > 10 {
				t.Fatalf("ttl_s %v, but expires %v is %.3f s away", got.TTL, got.Expires, left)
			}
		})
	}
}
