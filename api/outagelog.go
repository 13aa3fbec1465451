package api

import (
	"sync"
	"time"
)

// outageCodes are the error codes of answers that an outage of something
// outside the server causes for every request that needs it, all at once:
// the shared tier (S3) away. Their request lines are throttled
// (outageLog); one per request flooded the log during an outage (a replica
// serving 1,000 cold reads a second wrote 1,000 WARN lines a second) while
// the heartbeat already logs the outage's start, its progress every 10
// minutes and its end (fleet/registry). A data directory gone or not
// writable is one too: the store logs its start at ERROR and its end, and
// every upload fails alike meanwhile.
var outageCodes = map[string]bool{"shared_tier_unavailable": true, "fleet_unavailable": true, "data_dir_unavailable": true}

// defaultOutageLogEvery is how often a request line of each outage code is
// logged at WARN at most; the ones between go to INFO.
const defaultOutageLogEvery = 10 * time.Second

// outageLog throttles the request lines of each outage code: the first
// line in an interval is logged at its level, with how many lines of the
// code were demoted since the last one; the rest of the interval's are
// logged at INFO, as every answered request is, each with its request id
// (at the default --log-level info a client's X-Request-Id is still found,
// and the log grows no faster than it does with the same requests
// answered; WARN, which a --log-level warn keeps and alerts read, gets one
// line per interval). Per code, not per route or client: the cause is
// one, however many requests it fails. Safe for concurrent use.
type outageLog struct {
	every time.Duration

	mu     sync.Mutex
	logged map[string]time.Time // when each code's last line was logged
	since  map[string]int       // lines of each code demoted since
}

// due reports whether a request line of code, answered at now, is to be
// logged at its level, and if so how many lines of code were demoted since
// the last one that was.
func (l *outageLog) due(code string, now time.Time) (demoted int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logged == nil {
		l.logged, l.since = map[string]time.Time{}, map[string]int{}
	}
	if last, seen := l.logged[code]; seen && now.Sub(last) < l.every {
		l.since[code]++
		return 0, false
	}
	demoted = l.since[code]
	l.logged[code], l.since[code] = now, 0
	return demoted, true
}
