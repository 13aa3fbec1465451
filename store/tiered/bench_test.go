package tiered_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// BenchmarkTiers reads one object four ways in one run, side by side, each
// read after the same untimed settling (the last fill done, a hot delete):
// a hot-tier hit; a shared-tier hit (the hot tier emptied before every
// read, so each read is a flight that fetches from S3 and fills Badger);
// the S3 store alone (record and blob GETs, digest verified, no fill); and a
// direct minio-go GetObject of the object holding the bytes (the blob, or
// for an entry inline in its record, the record), the floor the shared
// tier is measured against. The shared-tier read's fill of the hot tier
// runs in the background after the read and is waited for untimed. MB/s comes from SetBytes; p50-µs is the median
// read. Run: go test -run '^$' -bench Tiers ./store/tiered
func BenchmarkTiers(b *testing.B) {
	srv := s3test.Start(b)
	bucket := srv.NewBucket(b)
	ctx := context.Background()
	for _, size := range []int{4 << 10, 16 << 20} {
		data := storetest.Data(uint64(size), size)
		key := storetest.KeyOf("bench-" + sizeName(size))
		r := newReplica(b, srv, bucket, b.TempDir(), opts{})
		put(b, r, key, data)
		digest := sha256.Sum256(data)
		sum := hex.EncodeToString(digest[:])
		direct := srv.Client(b, http.DefaultTransport)
		readAll := func(b *testing.B, rc io.ReadCloser, err error) {
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil || n != int64(size) {
				b.Fatalf("read %d of %d bytes: %v", n, size, err)
			}
		}
		// Every timed read is preceded by the same untimed work, so that the
		// paths are compared under one condition: the shared-tier read needs
		// the last read's fill done and its hot copy gone, and the others
		// get the same wait and a delete of a key they do not read.
		other := storetest.KeyOf("bench-other")
		settle := func(b *testing.B, k store.Key) {
			r.Idle()
			if err := r.hot.Delete(ctx, "default", k); err != nil && !errors.Is(err, store.ErrNotFound) {
				b.Fatal(err)
			}
		}
		paths := []struct {
			name  string
			setup func(b *testing.B)
			read  func(b *testing.B)
		}{
			{"hot", func(b *testing.B) { settle(b, other) }, func(b *testing.B) {
				_, rc, err := r.Get(ctx, "default", key, 0, -1)
				readAll(b, rc, err)
			}},
			{"shared", func(b *testing.B) { settle(b, key) }, func(b *testing.B) {
				_, rc, err := r.Get(ctx, "default", key, 0, -1)
				readAll(b, rc, err)
			}},
			{"s3store", func(b *testing.B) { settle(b, other) }, func(b *testing.B) {
				_, rc, err := r.shared.Get(ctx, "default", key, 0, -1)
				readAll(b, rc, err)
			}},
			{"direct", func(b *testing.B) { settle(b, other) }, func(b *testing.B) {
				if size <= s3.DefaultInlineMax {
					// The bytes are in the entry record: that is the object.
					obj, err := direct.GetObject(ctx, bucket, "fleet/entries/default/"+key.String(), minio.GetObjectOptions{})
					if err != nil {
						b.Fatal(err)
					}
					n, err := io.Copy(io.Discard, obj)
					obj.Close()
					if err != nil || n < int64(size) {
						b.Fatalf("read %d bytes of the record: %v", n, err)
					}
					return
				}
				obj, err := direct.GetObject(ctx, bucket, "fleet/blobs/"+sum, minio.GetObjectOptions{})
				readAll(b, obj, err)
			}},
		}
		for _, p := range paths {
			b.Run(p.name+"-"+sizeName(size), func(b *testing.B) {
				b.SetBytes(int64(size))
				times := make([]time.Duration, 0, b.N)
				for b.Loop() {
					if p.setup != nil {
						b.StopTimer()
						p.setup(b)
						b.StartTimer()
					}
					start := time.Now()
					p.read(b)
					times = append(times, time.Since(start))
				}
				slices.Sort(times)
				b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
			})
		}
		r.Close()
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}
