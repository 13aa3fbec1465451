package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/lease"
	"github.com/cachesvc/cachesvc/wire"
)

// MaxWait bounds GET ?wait=.
const MaxWait = 300 * time.Second

// waitAccepted is what every bad_wait message says ?wait= takes, in
// seconds first: curl users and old clients send plain numbers.
var waitAccepted = fmt.Sprintf("to wait for an entry being compiled, send seconds above 0 and at most %d (e.g. wait=60) or a Go duration up to %s (e.g. wait=60s)", int(MaxWait.Seconds()), MaxWait)

// parseWait parses ?wait= as a Go duration ("60s", "1m") or plain seconds,
// above 0 and at most MaxWait. The caller calls it when the query has
// wait=: present but empty (a templated ?wait=$WAIT with WAIT unset) is
// refused rather than read as absent, which would answer a lookup that
// never waited.
func parseWait(v string) (time.Duration, error) {
	if v == "" {
		return 0, Errorf(http.StatusBadRequest, "bad_wait", "?wait= is empty: %s; or drop wait for a lookup that answers at once.", waitAccepted)
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || f != f { // NaN parses
			return 0, Errorf(http.StatusBadRequest, "bad_wait", "?wait=%s is not a duration: %s.", wire.Echo(v), waitAccepted)
		}
		if f <= 0 || f > MaxWait.Seconds() { // also ±Inf, before the conversion overflows
			return 0, Errorf(http.StatusBadRequest, "bad_wait", "?wait=%s is out of range: %s.", v, waitAccepted)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d <= 0 || d > MaxWait {
		return 0, Errorf(http.StatusBadRequest, "bad_wait", "?wait=%s is out of range: %s.", v, waitAccepted)
	}
	return d, nil
}

// statusClientGone answers a wait whose client left (nginx's 499 "client
// closed request"): nobody reads it, but the request's log line and
// cachesvc_http_requests_total say what happened. It counts no lookup.
const statusClientGone = 499

// MaxWaited bounds ?waited=: a client that has waited this long for one
// compile has stopped waiting for a compile and is waiting for a hung
// holder; the Python client's lease_wait cap is 3600 s.
const MaxWaited = 24 * time.Hour

// parseWaited parses ?waited=, the seconds a client already spent on the
// earlier slices of one wait (0 on its first slice): plain seconds or a Go
// duration. Its presence, not its value, says that the client counted its
// miss before it waited, so present but empty is refused rather than read
// as absent. It needs ?wait=: alone it continues nothing.
func parseWaited(v string, present, wait bool) (time.Duration, error) {
	if !present {
		return 0, nil
	}
	if !wait {
		// The example is a query to send: the value as is when it is a
		// valid one (quoted, as the message quotes it, it was not), else
		// a valid one.
		example := "120"
		if _, err := waitedValue(v); err == nil {
			example = v
		}
		return 0, Errorf(http.StatusBadRequest, "bad_waited", "?waited=%s continues a long poll, so it needs ?wait= too: send e.g. ?wait=50s&waited=%s, or drop waited.", wire.Echo(v), example)
	}
	return waitedValue(v)
}

// waitedValue parses the value of a ?waited= that is present: plain
// seconds or a Go duration, from 0 to MaxWaited; empty is refused.
func waitedValue(v string) (time.Duration, error) {
	if v == "" {
		return 0, Errorf(http.StatusBadRequest, "bad_waited", "?waited= is empty: send the seconds already waited for this entry since your miss (waited=0 on the first slice), or drop waited if you did not look the entry up before waiting.")
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || f != f { // NaN parses
			return 0, Errorf(http.StatusBadRequest, "bad_waited", "?waited=%s is not a duration: send the seconds already waited for this entry, e.g. waited=120 or waited=2m.", wire.Echo(v))
		}
		if f < 0 || f > MaxWaited.Seconds() { // also ±Inf, before the conversion overflows
			return 0, Errorf(http.StatusBadRequest, "bad_waited", "?waited=%s is out of range: it must be at least 0 and at most %s.", wire.Echo(v), MaxWaited)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 || d > MaxWaited {
		return 0, Errorf(http.StatusBadRequest, "bad_waited", "?waited=%s is out of range: it must be at least 0 and at most %s.", wire.Echo(v), MaxWaited)
	}
	return d, nil
}

// waitForEntry parks a GET ?wait= behind the entry's compile lease until the
// entry is written, the lease ends without it, or the wait runs out. It
// returns nil to let the GET handler answer (200 with the bytes, or its 404)
// and an error for a 404 that explains why the wait ended empty.
func (g *entriesAPI) waitForEntry(c *fiber.Ctx, r *request, d time.Duration) error {
	ns, key := r.Namespace, r.Key
	ctx := c.UserContext()
	present := func() bool {
		_, err := g.store.Stat(ctx, ns, key)
		return err == nil
	}
	if peerGone(c.Context().Conn()) {
		// Read after its client gave up (a replica resumed after a stop):
		// answering would count a lookup nobody received.
		c.Context().SetConnectionClose()
		return Errorf(statusClientGone, "client_gone", "The client closed the connection before its wait for entry %s began.", key)
	}
	if present() {
		return nil
	}
	w, l, ok, err := g.leases.Wait(ctx, ns, key)
	if errors.Is(err, lease.ErrTooManyWaiters) {
		return &Error{Status: http.StatusServiceUnavailable, Code: "too_many_waiters", Message: sentence(err.Error() + "; retry later or compile yourself"), Err: err}
	}
	if err != nil || !ok {
		return nil // no lease: the handler answers now (404 unless just written)
	}
	defer g.leases.Cancel(w)
	if present() { // written between the first check and parking
		return nil
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	expiry := time.NewTimer(time.Until(l.Expires))
	defer expiry.Stop()
	// The entry may be written on another replica of the fleet, which wakes
	// no waiter here: look for it every second, and for a client that left
	// (peergone.go), whose waiter would otherwise hold its place until the
	// wait runs out.
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	// gone is checked before answering with the entry too: a client that
	// gave up (its timeout, or this replica was stopped while it waited)
	// receives nothing, so the wait must count no hit.
	gone := func() error {
		if !peerGone(c.Context().Conn()) {
			return nil
		}
		c.Context().SetConnectionClose()
		return Errorf(statusClientGone, "client_gone", "The client closed the connection while waiting for entry %s; the wait ended.", key)
	}
	for {
		select {
		case <-poll.C:
			if err := gone(); err != nil {
				return err
			}
			if present() {
				return nil
			}
		case <-w.C():
			if err := gone(); err != nil {
				return err
			}
			if w.Outcome() == lease.Written || present() {
				return nil
			}
			if w.Outcome() == lease.Closed {
				return Errorf(http.StatusServiceUnavailable, "shutting_down", "The server is shutting down; entry %s was not written yet.", key)
			}
			if w.Outcome() == lease.Displaced {
				return Errorf(http.StatusNotFound, "not_found", "Entry %s is not written yet and this wait gave its place to another namespace's: namespace %q parks more than half of the server's waiters; compile it yourself.", key, ns)
			}
			e := Errorf(http.StatusNotFound, "not_found", "Entry %s was not written: holder %q %s the lease without it; compile it yourself.", key, l.Holder, w.Outcome())
			switch w.Outcome() {
			case lease.Released:
				e.Details = wire.LeaseEndDetails{Lease: wire.LeaseReleased, Holder: l.Holder}
			case lease.Expired:
				e.Details = wire.LeaseEndDetails{Lease: wire.LeaseExpired, Holder: l.Holder}
			}
			return e
		case <-expiry.C:
			if cur, held := g.leases.Holder(ctx, ns, key); held {
				l = cur // renewed, or taken over by a new holder: keep waiting
				expiry.Reset(time.Until(cur.Expires))
				continue
			}
			if present() {
				return gone()
			}
			e := Errorf(http.StatusNotFound, "not_found", "Entry %s was not written: the lease held by %q expired without it; compile it yourself.", key, l.Holder)
			e.Details = wire.LeaseEndDetails{Lease: wire.LeaseExpired, Holder: l.Holder}
			return e
		case <-deadline.C:
			if present() {
				return gone()
			}
			return Errorf(http.StatusNotFound, "wait_timeout", "Entry %s is still being compiled by %q (lease until %s) after waiting %s.", key, l.Holder, l.Expires.UTC().Format(time.RFC3339), d)
		case <-ctx.Done():
			return fmt.Errorf("wait for %s/%s: %w", ns, key, ctx.Err())
		}
	}
}
