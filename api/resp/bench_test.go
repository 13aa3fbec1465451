package resp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// BenchmarkGet measures a GET hit through go-redis (one connection, no
// pipelining) for a small and a large value, and a SET of an existing key.
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	e := start(b, options{})
	c := redis.NewClient(&redis.Options{Addr: e.addr, PoolSize: 1})
	defer c.Close()
	for _, size := range []int{4 << 10, 1 << 20} {
		k := torchKey(fmt.Sprintf("bench%d", size))
		v := strings.Repeat("x", size)
		if err := c.Set(ctx, k, v, 0).Err(); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("get-%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if got, err := c.Get(ctx, k).Result(); err != nil || len(got) != size {
					b.Fatal(len(got), err)
				}
			}
		})
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
