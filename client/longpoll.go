package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

const (
	// maxWait is the server's bound on one ?wait= (api.MaxWait).
	maxWait = 300 * time.Second
	// defaultWaitSlice is Config.WaitSlice's default: below nginx's
	// default proxy_read_timeout of 60 s.
	defaultWaitSlice = 50 * time.Second
	// minSlice is the shortest slice: a proxy that answers 504 sooner than
	// minSlice/0.8 is failing, not timing out, and would fail every slice.
	minSlice = time.Second
)

// longPoll sends GET u?wait= for up to wait in all, in slices of at most
// the client's slice: a slice that ends in 404 wait_timeout (the holder's
// lease lives) is followed by the next. Every slice carries &waited= the
// time spent so far (0 on the first), which tells the server that the
// caller's own lookup counted the miss: it counts no second miss when the
// wait ends without the entry, one wait hit when it comes, and subtracts
// the whole wait from the compile time the hit saved. A reverse proxy's
// own 504 (its read timeout cut the slice) shrinks the slices to 0.8 times
// the cut, for every later long poll of this client too.
func (c *Client) longPoll(ctx context.Context, u string, wait time.Duration) (*http.Response, error) {
	start := time.Now()
	for {
		waited := time.Since(start)
		span := max(min(wait-waited, time.Duration(c.slice.Load()), maxWait), minSlice)
		// waited on every slice, 0 on the first: the caller's own GET
		// counted the miss this wait answers, so no slice counts another.
		q := "?wait=" + strconv.FormatFloat(span.Seconds(), 'f', 3, 64) +
			"&waited=" + strconv.FormatFloat(waited.Seconds(), 'f', 3, 64)
		req, err := c.newRequest(ctx, http.MethodGet, u+q, nil)
		if err != nil {
			return nil, err
		}
		sent := time.Now()
		resp, err := c.do(req, http.StatusOK)
		var e *Error
		if err == nil || !errors.As(err, &e) {
			return resp, err
		}
		switch {
		case e.Status == http.StatusNotFound && e.Code == "wait_timeout" && time.Since(start) < wait:
			continue // the holder is still compiling: wait on
		case e.Status == http.StatusGatewayTimeout && e.Code == "http_504": // not cachesvc's JSON: a proxy's page
			cut := time.Since(sent)
			if float64(cut) < float64(minSlice)/0.8 {
				return nil, err
			}
			next := time.Duration(0.8 * float64(cut))
			for cur := c.slice.Load(); int64(next) < cur && !c.slice.CompareAndSwap(cur, int64(next)); cur = c.slice.Load() {
			}
			if spent := time.Since(start); spent >= wait {
				return nil, &Error{Status: http.StatusNotFound, Code: "wait_timeout",
					Message: fmt.Sprintf("the entry was not written after waiting %s (in slices: a proxy cuts long polls after %s)", spent.Round(time.Second), cut.Round(100*time.Millisecond))}
			}
		default:
			return nil, err
		}
	}
}
