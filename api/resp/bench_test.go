package resp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/cachesvc/cachesvc/api/resp"
)

// BenchmarkGet measures a GET hit through go-redis (one connection, no
// pipelining) for a small and a large value, and a SET of an existing key;
// get-4KiB-nomemo maps the key through the Keyer every time.
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	for _, memo := range []int{0, -1} {
		e := start(b, options{resp: func(c *resp.Config) { c.KeyMemo = memo }})
		c := redis.NewClient(&redis.Options{Addr: e.addr, PoolSize: 1})
		defer c.Close()
		for _, size := range []int{4 << 10, 1 << 20} {
			if memo < 0 && size > 4<<10 {
				continue
			}
			k := torchKey(fmt.Sprintf("bench%d", size))
			v := strings.Repeat("x", size)
			if err := c.Set(ctx, k, v, 0).Err(); err != nil {
				b.Fatal(err)
			}
			suffix := ""
			if memo < 0 {
				suffix = "-nomemo"
			}
			b.Run(fmt.Sprintf("get-%dKiB%s", size>>10, suffix), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					if got, err := c.Get(ctx, k).Result(); err != nil || len(got) != size {
						b.Fatal(len(got), err)
					}
				}
			})
			if memo < 0 {
				continue
			}
			b.Run(fmt.Sprintf("set-existing-%dKiB", size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					if err := c.Set(ctx, k, v, 0).Err(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
