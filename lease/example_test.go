package lease_test

import (
	"fmt"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/lease"
)

// One holder compiles; a second caller parks behind the lease and is woken
// when the entry is written.
func Example() {
	t := lease.New(lease.Config{})
	var key cachekey.Key
	_, granted, _ := t.Acquire("default", key, "host-a:1", time.Minute)
	fmt.Println("host-a compiles:", granted)
	l, granted, _ := t.Acquire("default", key, "host-b:7", time.Minute)
	fmt.Println("host-b compiles:", granted, "- held by", l.Holder)
	w, _, _, _ := t.Wait("default", key)
	t.Written("default", key) // host-a's PUT
	<-w.C()
	fmt.Println("host-b woken:", w.Outcome())
	// Output:
	// host-a compiles: true
	// host-b compiles: false - held by host-a:1
	// host-b woken: written
}
