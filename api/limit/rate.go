package limit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rates is a set of token buckets, one per identity (a token name, or a
// client address for anonymous requests). It holds at most MaxKeys buckets;
// when full, an idle bucket (one that has refilled completely) is dropped to
// make room, else the request is refused as if limited. Safe for concurrent
// use.
type Rates struct {
	limit   rate.Limit
	burst   int
	maxKeys int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	// noIdleUntil is the earliest time a bucket can be idle, as the last
	// scan that found none computed: until then a new key is refused
	// without scanning. A scan of a full table takes about 250 µs under
	// mu, and a client sending from many addresses made one per request
	// (BenchmarkRatesFullTableNewKey).
	noIdleUntil time.Time
	// now is the clock, time.Now; tests set their own so that refills
	// need no real time to pass.
	now func() time.Time
}

// NewRates returns buckets refilling at perSecond requests per second with
// room for burst. perSecond <= 0 means no limit: Allow always succeeds.
func NewRates(perSecond float64, burst, maxKeys int) *Rates {
	if burst < 1 {
		burst = 1
	}
	if maxKeys < 1 {
		maxKeys = 10000
	}
	return &Rates{limit: rate.Limit(perSecond), burst: burst, maxKeys: maxKeys, buckets: map[string]*rate.Limiter{}, now: time.Now}
}

// Limited reports whether Allow can refuse: false without a limit, so that
// callers need not build a key for every request.
func (r *Rates) Limited() bool { return r != nil && r.limit > 0 }

// Allow takes one request from key's bucket. When the bucket is empty it
// takes nothing and returns false with how long until a request would be
// allowed.
func (r *Rates) Allow(key string) (bool, time.Duration) {
	if r == nil || r.limit <= 0 {
		return true, 0
	}
	now := r.now()
	r.mu.Lock()
	b, ok := r.buckets[key]
	if !ok {
		if len(r.buckets) >= r.maxKeys && !r.evictIdle(now) {
			r.mu.Unlock()
			return false, time.Second
		}
		b = rate.NewLimiter(r.limit, r.burst)
		r.buckets[key] = b
	}
	r.mu.Unlock()
	res := b.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// evictIdle drops buckets that are full again (their owner has been idle
// long enough that forgetting them changes nothing). When none is, it
// notes when the fullest will be (buckets only get emptier until then, as
// no new one enters a full table) and scans no more until that time.
// Called with mu held.
func (r *Rates) evictIdle(now time.Time) bool {
	if now.Before(r.noIdleUntil) {
		return false
	}
	dropped := false
	soonest := time.Hour // a bound on the wait, whatever the rate
	for k, b := range r.buckets {
		missing := float64(r.burst) - b.TokensAt(now)
		if missing <= 0 {
			delete(r.buckets, k)
			dropped = true
			continue
		}
		if d := time.Duration(missing / float64(r.limit) * float64(time.Second)); d < soonest {
			soonest = d
		}
	}
	if !dropped {
		r.noIdleUntil = now.Add(soonest)
	}
	return dropped
}

// Gate bounds how many operations run at once. The zero value and a nil
// *Gate admit everything. Safe for concurrent use.
type Gate struct {
	slots chan struct{}
}

// NewGate returns a gate admitting n at once; n <= 0 means no limit.
func NewGate(n int) *Gate {
	if n <= 0 {
		return &Gate{}
	}
	return &Gate{slots: make(chan struct{}, n)}
}

// TryEnter takes a slot without waiting. It returns false when every slot
// is taken; on true the caller must call Leave.
func (g *Gate) TryEnter() bool {
	if g == nil || g.slots == nil {
		return true
	}
	select {
	case g.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// Leave returns a slot taken by TryEnter.
func (g *Gate) Leave() {
	if g == nil || g.slots == nil {
		return
	}
	<-g.slots
}

// InUse returns how many slots are taken.
func (g *Gate) InUse() int {
	if g == nil || g.slots == nil {
		return 0
	}
	return len(g.slots)
}
