package api_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// BenchmarkGetEntry measures GET of a stored entry over a keep-alive
// connection to a real server and Badger store.
func BenchmarkGetEntry(b *testing.B) {
	for _, size := range []int64{4 << 10, 1 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			srv := apitest.Start(b, apitest.Options{})
			url := srv.EntryURL("default", keyOf(fmt.Sprint("bench-get", size)))
			req, _ := http.NewRequest(http.MethodPut, url, newPayload(1, size))
			req.ContentLength = size
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusCreated {
				b.Fatalf("PUT: %v %v", resp, err)
			}
			resp.Body.Close()
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				resp, err := http.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || n != size {
					b.Fatalf("GET = %d, %d bytes", resp.StatusCode, n)
				}
			}
		})
	}
}

// BenchmarkPutEntry measures PUT of new entries (distinct bytes, so no
// dedup) through a real server into Badger.
func BenchmarkPutEntry(b *testing.B) {
	for _, size := range []int64{4 << 10, 1 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			srv := apitest.Start(b, apitest.Options{})
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				url := srv.EntryURL("default", keyOf(fmt.Sprint("bench-put", size, i)))
				req, _ := http.NewRequest(http.MethodPut, url, newPayload(uint64(i), size))
				req.ContentLength = size
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					b.Fatalf("PUT = %d", resp.StatusCode)
				}
			}
		})
	}
}
