package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
)

// Defaults for the zero values of AccessConfig fields.
const (
	// DefaultAccessInterval is the default AccessConfig.Interval.
	DefaultAccessInterval = 5 * time.Minute
	// DefaultAccessMaxKeys is the default AccessConfig.MaxKeys: about
	// 10 MB of memory and a 10 MB object at most.
	DefaultAccessMaxKeys = 100_000
)

// AccessConfig configures an AccessLog. Bucket and ID are required; the
// zero value of every other field means its default.
type AccessConfig struct {
	// Bucket is the shared tier (Dial).
	Bucket *Bucket
	// ID is the replica's id (CheckID), as in Config.ID.
	ID string
	// Interval is how often the served entries are written. Default 5 m.
	// It must be far below gc's age (720 h by default): an entry whose only
	// use in the age is still in memory looks unused to gc.
	Interval time.Duration
	// MaxKeys bounds the distinct entries held between flushes; reaching it
	// flushes early. Default 100,000.
	MaxKeys int
	// Now replaces time.Now (tests back-date flushes with it).
	Now func() time.Time
	// Logger receives the log's logs; nil means slog.Default().
	Logger *slog.Logger
}

// accessKey is one served entry.
type accessKey struct {
	ns  string
	key store.Key
}

// AccessLog records which entries this replica served, hot or shared, and
// writes them to access/<id>/<unix nanoseconds>.json every Interval, so
// that gc keeps entries a replica uses even when they come from its hot
// tier (which the shared tier never hears of). Create one with
// NewAccessLog, Start it, call Touch on every hit and Close at shutdown. It
// is safe for concurrent use.
type AccessLog struct {
	cfg AccessConfig
	log *slog.Logger

	mu       sync.Mutex
	cur      map[accessKey]struct{}
	lastName int64 // the last object's time, so that two flushes never share a name

	flushMu sync.Mutex // one flush at a time
	kick    chan struct{}
	dropped atomic.Int64
	outage  outage

	startOnce, closeOnce sync.Once
	stop, done           chan struct{}
}

// NewAccessLog checks cfg and returns an AccessLog. It does no I/O.
func NewAccessLog(cfg AccessConfig) (*AccessLog, error) {
	if cfg.Bucket == nil {
		return nil, fmt.Errorf("new access log: %w: no bucket", store.ErrInvalid)
	}
	if err := CheckID(cfg.ID); err != nil {
		return nil, fmt.Errorf("new access log: %w", err)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultAccessInterval
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultAccessMaxKeys
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &AccessLog{
		cfg: cfg, log: cfg.Logger, cur: make(map[accessKey]struct{}),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// Touch records that (ns, key) was served. It takes one short lock and
// never waits for I/O: when MaxKeys distinct entries are waiting it asks
// the flusher to write them early, and when the flusher has not yet taken
// them (the bucket is slow or down) the touch is dropped and counted
// (Dropped): the entry may then look unused to gc, which costs a recompile
// later, never a wrong answer.
func (a *AccessLog) Touch(ns string, key store.Key) {
	k := accessKey{ns, key}
	a.mu.Lock()
	_, seen := a.cur[k]
	added := !seen && len(a.cur) < a.cfg.MaxKeys
	if added {
		a.cur[k] = struct{}{}
	}
	full := len(a.cur) >= a.cfg.MaxKeys
	a.mu.Unlock()
	if !seen && !added {
		a.dropped.Add(1)
	}
	if full {
		select {
		case a.kick <- struct{}{}:
		default: // a flush is already asked for
		}
	}
}

// Dropped is how many touches were lost because the set was full.
func (a *AccessLog) Dropped() int64 { return a.dropped.Load() }

// Pending is how many distinct entries wait for the next flush.
func (a *AccessLog) Pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cur)
}

// Start starts the flusher: every Interval, and early when the set is full.
// Calling it again does nothing.
func (a *AccessLog) Start() {
	a.startOnce.Do(func() { go a.loop() })
}

func (a *AccessLog) loop() {
	defer close(a.done)
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		case <-a.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = a.Flush(ctx) // logged per outage by Flush
		cancel()
	}
}

// Flush writes the entries touched since the last flush as one object now.
// On failure they are put back (up to MaxKeys) for the next flush, and the
// error is returned and logged (once per outage). An empty set writes
// nothing.
func (a *AccessLog) Flush(ctx context.Context) error {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	a.mu.Lock()
	taken := a.cur
	if len(taken) == 0 {
		a.mu.Unlock()
		return nil
	}
	a.cur = make(map[accessKey]struct{}, min(len(taken), a.cfg.MaxKeys))
	t := a.cfg.Now().UnixNano()
	if t <= a.lastName {
		t = a.lastName + 1
	}
	a.lastName = t
	a.mu.Unlock()

	err := a.write(ctx, t, taken)
	a.outage.report(a.log, a.cfg.Now(), "access log flush", err)
	if err != nil {
		a.mu.Lock()
		for k := range taken {
			if len(a.cur) >= a.cfg.MaxKeys {
				a.dropped.Add(1)
				continue
			}
			a.cur[k] = struct{}{}
		}
		a.mu.Unlock()
	}
	return err
}

// accessObject is the JSON of an access log object.
type accessObject struct {
	Version int       `json:"v"`
	Replica string    `json:"replica"`
	Time    time.Time `json:"time"`
	// Entries are "<namespace>/<key hex>", sorted.
	Entries []string `json:"entries"`
}

// write puts one access object for the set, named by t.
func (a *AccessLog) write(ctx context.Context, t int64, set map[accessKey]struct{}) error {
	obj := accessObject{Version: 1, Replica: a.cfg.ID, Time: time.Unix(0, t).UTC(), Entries: make([]string, 0, len(set))}
	for k := range set {
		obj.Entries = append(obj.Entries, k.ns+"/"+k.key.String())
	}
	sort.Strings(obj.Entries)
	js, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode access log: %w", err)
	}
	b := a.cfg.Bucket
	name := b.AccessPrefix(a.cfg.ID) + strconv.FormatInt(t, 10) + ".json"
	_, err = b.Client.PutObject(ctx, b.Name, name, bytes.NewReader(js), int64(len(js)),
		minio.PutObjectOptions{ContentType: "application/json", DisableMultipart: true})
	if err != nil {
		return fmt.Errorf("write access log s3://%s/%s: %w", b.Name, name, err)
	}
	return nil
}

// Close stops the flusher and flushes what is left, bounded by ctx. It
// returns that flush's error; calling it again does nothing.
func (a *AccessLog) Close(ctx context.Context) error {
	var err error
	a.closeOnce.Do(func() {
		close(a.stop)
		a.startOnce.Do(func() { close(a.done) })
		<-a.done
		err = a.Flush(ctx)
	})
	return err
}

// DecodeAccess reads an access log object from r and calls fn with each
// entry it names, streaming (an object's size does not matter). Entries
// that are not "<valid namespace>/<64 hex>" are skipped.
func DecodeAccess(r io.Reader, fn func(ns string, key store.Key)) error {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("decode access log: %w", err)
		}
		if tok != "entries" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("decode access log: %w", err)
			}
			continue
		}
		if err := expectDelim(dec, '['); err != nil {
			return err
		}
		for dec.More() {
			var s string
			if err := dec.Decode(&s); err != nil {
				return fmt.Errorf("decode access log: %w", err)
			}
			ns, hexKey, ok := strings.Cut(s, "/")
			if !ok || cachekey.ValidateNamespace(ns) != nil {
				continue
			}
			if key, err := cachekey.ParseKey(hexKey); err == nil {
				fn(ns, key)
			}
		}
		if err := expectDelim(dec, ']'); err != nil {
			return err
		}
	}
	return nil
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("decode access log: %w", err)
	}
	if tok != d {
		return fmt.Errorf("decode access log: got %v, want %v", tok, d)
	}
	return nil
}
