package tiered_test

import (
	"testing"

	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestUsageSaysWhichTier: a replica whose bucket holds more than its hot
// tier's --max-size reports the shared tier's entries and bytes without a
// limit, and the hot tier's own usage against the limit beside them,
// never the bucket's bytes as a share of the hot tier's limit (which read
// as 167% full here).
func TestUsageSaysWhichTier(t *testing.T) {
	srv := s3test.Start(t)
	const size = 1 << 20
	a := newReplica(t, srv, srv.NewBucket(t), t.TempDir(), opts{hotMax: 3 * size})
	defer a.Close()
	for i := range 5 {
		put(t, a, storetest.KeyOf(string(rune('a'+i))), storetest.Data(uint64(i), size))
	}
	u := a.Usage()
	if u.Hot == nil {
		t.Fatalf("Usage %+v has no hot tier", u)
	}
	tests := []struct {
		name                  string
		got                   wire.StoreUsage
		tier                  string
		entries, max          int64
		minBytes, maxBytesNow int64
	}{
		{"shared tier", u, wire.StoreTierShared, 5, 0, 5 * size, 6 * size},
		{"hot tier", *u.Hot, wire.StoreTierHot, 3, 3 * size, 2 * size, 3 * size},
	}
	for _, tt := range tests {
		g := tt.got
		if g.Tier != tt.tier || g.Entries != tt.entries || g.MaxBytes != tt.max || g.Bytes < tt.minBytes || g.Bytes > tt.maxBytesNow {
			t.Errorf("%s: tier %q, %d entries, %d bytes, limit %d; want %q, %d entries, %d..%d bytes, limit %d",
				tt.name, g.Tier, g.Entries, g.Bytes, g.MaxBytes, tt.tier, tt.entries, tt.minBytes, tt.maxBytesNow, tt.max)
		}
	}
	if u.Hot.Evictions != 2 || u.Evictions != 2 {
		t.Errorf("evictions: hot %d, outer %d; want 2 (the hot tier's) in both", u.Hot.Evictions, u.Evictions)
	}
}
