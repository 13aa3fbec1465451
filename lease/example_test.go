package lease_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/lease"
)

// One holder compiles; a second caller parks behind the lease and is woken
// when the entry is written.
func Example() {
	ctx := context.Background()
	t := lease.New(lease.Config{})
	var key cachekey.Key
	_, granted, _ := t.Acquire(ctx, "default", key, "host-a:1", time.Minute)
	fmt.Println("host-a compiles:", granted)
	l, granted, _ := t.Acquire(ctx, "default", key, "host-b:7", time.Minute)
	fmt.Println("host-b compiles:", granted, "- held by", l.Holder)
	w, _, _, _ := t.Wait(ctx, "default", key)
	t.Written(ctx, "default", key) // host-a's PUT
	<-w.C()
	fmt.Println("host-b woken:", w.Outcome())
	// Output:
	// host-a compiles: true
	// host-b compiles: false - held by host-a:1
	// host-b woken: written
}
