package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/fleet/registry"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/lease"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/tiered"
)

// minExpiryInterval is the shortest positive --expiry-interval: below it,
// passes would run back to back and spin a core for nothing.
const minExpiryInterval = 100 * time.Millisecond

// minHeaderSize and maxHeaderSize bound --max-header-size. Every connection
// holds a read buffer that large from its first byte, so 64GiB crashed serve
// on its first request (runtime: out of memory); below 1KiB a request line
// with its key and a bearer token no longer fits.
const (
	minHeaderSize = 1 << 10
	maxHeaderSize = 1 << 20
)

// serveOptions are the flags of `cachesvc serve`.
type serveOptions struct {
	Addr          string
	Data          string
	MaxSize       int64
	MaxEntrySize  int64
	SyncWrites    bool
	LogFormat     string
	LogLevel      string
	ShutdownGrace time.Duration
	// ShutdownDelay is how long serve goes on serving after SIGTERM, with
	// /readyz failing, before it stops accepting (drain.go).
	ShutdownDelay time.Duration
	PprofAddr     string
	Plugins       pluginOptions   // plugin.go
	Security      securityOptions // security.go
	S3            s3Options       // fleet.go
	Replica       replicaOptions  // fleet.go
	WriteMode     string
	QueueEntries  int
	QueueBytes    int64
	// QuarantineAfter is how many distinct clients must report an entry as
	// unloadable before it is quarantined.
	QuarantineAfter int
	Redis           redisOptions // redis.go
	DigestLookups   bool

	// Namespaces is the namespaces file (namespaces.go): per-namespace
	// quotas and expiry, reloaded on SIGHUP.
	Namespaces     string
	ExpiryInterval time.Duration

	// shared is the shared tier's configuration, resolved once from S3 (the
	// credentials file read) by serve for every user of the bucket.
	shared s3.Config
	// quotas are the namespaces file's, read by serve before the store
	// opens.
	quotas store.Quotas
}

// runServe parses the serve flags and runs the server until ctx ends
// (SIGINT/SIGTERM). A server that then shuts down cleanly exits 0: a
// requested stop of a daemon is its success.
func runServe(ctx context.Context, args []string, sio stdio) error {
	o, err := parseServeFlags(args, sio)
	if err != nil {
		return err
	}
	logger, err := newLogger(sio.Stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		return usagef("%s", err)
	}
	sio.markDaemon() // interrupt.go
	err = serve(ctx, o, sio, logger, nil)
	var ue *usageError
	if err != nil && ctx.Err() != nil && stoppedBy(err, true) {
		// SIGTERM or SIGINT cut the start short: a stop asked for, not a
		// failure to page anyone about (the exit status says which
		// signal). An error of the stop itself (the store did not
		// close) is one, and is logged below.
		logger.Info("stopped while starting", "cause", err)
		return err
	}
	if err != nil && !errors.As(err, &ue) {
		// In the log's own format too: with --log-format json a log
		// shipper could not parse the plain "cachesvc serve: ..." line
		// that main prints, the one that says why the process ended.
		logger.Error("serve failed", "err", err)
	}
	return err
}

// parseServeFlags parses and checks the serve flags, resolving the values
// whose flag and library meanings differ (0 turns the signature memo and
// the expiry pass off), so that the flags can be tested without serving.
func parseServeFlags(args []string, sio stdio) (serveOptions, error) {
	var o serveOptions
	fs := newFlagSet("serve", "Run the cache server until SIGINT or SIGTERM.", sio)
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:8080", "`host:port` to listen on (port 0 picks a free port)")
	fs.StringVar(&o.Data, "data", "./cachesvc-data", "`directory` of the Badger store (created if missing)")
	sizeVar(fs, &o.MaxSize, "max-size", 0, "store size limit, e.g. 100GiB; least recently used entries are evicted past it (0 = unlimited)")
	sizeVar(fs, &o.MaxEntrySize, "max-entry-size", 4<<30, "largest entry accepted, e.g. 512MiB; larger uploads get 413 (0 = unlimited)")
	fs.BoolVar(&o.SyncWrites, "sync-writes", false, "fsync every upload before acknowledging it, so it survives power loss (slower; concurrent uploads share the fsyncs)")
	fs.StringVar(&o.Namespaces, "namespaces", "", "namespaces `file` (JSON): quotas and expiry per namespace of this server's store, e.g. {\"namespaces\": {\"team-a\": {\"max_bytes\": \"50GB\", \"max_entries\": 100000, \"max_idle\": \"168h\", \"max_age\": \"30d\"}}, \"default\": {...}}; an upload into a namespace at its quota evicts that namespace's least recently used entries, one that can never fit gets 507. Reloaded on SIGHUP, all or nothing (in a fleet it bounds each replica's hot tier)")
	fs.DurationVar(&o.ExpiryInterval, "expiry-interval", store.DefaultExpiryInterval, "how often the background pass applies max_idle, max_age and lowered quotas (each pass removes and reads at most 4096 entries; a backlog gets passes back to back; at least 100ms; 0 or negative: off, only uploads enforce quotas)")
	fs.StringVar(&o.LogFormat, "log-format", "auto", "log `format`: text, json, or auto (text on a terminal, json otherwise)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	// context.WithTimeout takes a negative grace as an expired one, so -1s
	// would quietly mean 0: refused rather than guessed.
	durationVar(fs, &o.ShutdownGrace, "shutdown-grace", 30*time.Second, 0, "0 (abort in-flight requests at once) or more, e.g. 30s", "how long in-flight requests may finish after SIGTERM before they are aborted (0: abort them at once; negative is refused; another SIGTERM or SIGINT aborts them at once)")
	durationVar(fs, &o.ShutdownDelay, "shutdown-delay", 0, 0, "0 (stop accepting at once) or more, e.g. 10s", "after SIGTERM, go on serving this long with /readyz answering 503 shutting_down (and every response closing its connection), so that a load balancer stops sending before the listener closes; then --shutdown-grace applies (0: no delay; a second SIGTERM or SIGINT ends the delay)")
	fs.StringVar(&o.PprofAddr, "pprof-addr", "", "`host:port` to serve net/http/pprof on, for profiling (empty = off; keep it on loopback)")
	addPluginFlags(fs, &o.Plugins) // plugin.go
	fs.IntVar(&o.Plugins.MemoEntries, "signature-memo-entries", keying.DefaultMemoEntries, "signature digests whose keys are remembered, at most 16 MiB of results, kept in <data>/signature-memo across restarts (digest-first lookups answer from them); 0 turns the memo off")
	fs.BoolVar(&o.DigestLookups, "digest-lookups", true, "answer keys and lookup requests that send only the signature's SHA-256 (X-Cachesvc-Signature-Sha256) from the signature memo; false ignores that header, as an older server does")
	o.Security.register(fs) // security.go
	o.S3.register(fs)       // fleet.go
	o.S3.registerWrites(fs) // fleet.go
	o.Replica.register(fs)  // fleet.go
	o.Redis.register(fs)    // redis.go
	fs.StringVar(&o.WriteMode, "write-mode", "through", "with a shared tier: `mode` of uploads: through (2xx once the entry is durable in S3) or behind (2xx once in the hot tier; a persistent queue uploads it)")
	fs.IntVar(&o.QueueEntries, "upload-queue-entries", tiered.DefaultMaxQueueEntries, "write mode behind: most `entries` waiting for upload; past it uploads get 503 with Retry-After")
	sizeVar(fs, &o.QueueBytes, "upload-queue-size", tiered.DefaultMaxQueueBytes, "write mode behind: most bytes waiting for upload, e.g. 8GiB; past it uploads get 503 with Retry-After")
	fs.IntVar(&o.QuarantineAfter, "quarantine-after", api.DefaultQuarantineAfter, "quarantine an entry once this many distinct `clients` report that it fails to load (1 to 64; a report from an admin token quarantines at once)")
	if err := parseOperandless(fs, args, sio); err != nil {
		return o, err
	}
	// An empty --data would reach the store as "Config.Dir is empty",
	// which names no flag.
	if o.Data == "" {
		return o, usagef("--data is empty: give the store's directory (default ./cachesvc-data)")
	}
	if err := checkListenAddr("--addr", o.Addr); err != nil {
		return o, err
	}
	if err := checkTLSFlags(o.Security.TLS); err != nil {
		return o, err
	}
	// Serving without authentication off loopback is a flag combination
	// too (exit 2), caught before anything starts.
	if err := auth.CheckExposure(o.Addr, o.Security.Tokens != "", o.Security.InsecureNoAuth); err != nil {
		return o, usagef("%s", err)
	}
	if o.Redis.Addr != "" {
		if err := auth.CheckExposure(o.Redis.Addr, o.Security.Tokens != "", o.Security.InsecureNoAuth); err != nil {
			return o, usagef("--redis-addr: %s", err)
		}
	}
	if o.QuarantineAfter < 1 || o.QuarantineAfter > store.MaxReporters {
		return o, usagef("--quarantine-after %d: want 1 to %d distinct clients", o.QuarantineAfter, store.MaxReporters)
	}
	if err := o.Security.check(); err != nil {
		return o, err
	}
	if o.ExpiryInterval > 0 && o.ExpiryInterval < minExpiryInterval {
		// A pass right after another would spin a core for nothing.
		return o, usagef("--expiry-interval %s is too short: use 0 (off) or at least %s, e.g. 1m (each pass reads up to %d entries)",
			o.ExpiryInterval, minExpiryInterval, store.DefaultExpiryBatch)
	}
	if o.ExpiryInterval == 0 {
		// 0 is off, as for the other flags where 0 means none; the store
		// reads a zero ExpiryInterval as its 1m default and runs no pass
		// only for a negative one.
		o.ExpiryInterval = -1
	}
	switch {
	case o.Plugins.MemoEntries < 0:
		return o, usagef("--signature-memo-entries %d: use 0 (off) or more", o.Plugins.MemoEntries)
	case o.Plugins.MemoEntries == 0:
		o.Plugins.MemoEntries = -1 // keying: negative turns the memo off
	}
	if err := o.S3.validate(); err != nil {
		return o, err
	}
	if o.WriteMode != "through" && o.WriteMode != "behind" {
		return o, usagef("--write-mode %q: use through or behind", o.WriteMode)
	}
	if o.WriteMode == "behind" && !o.S3.enabled() {
		// Without a shared tier there is nothing to write behind to:
		// every upload would be stored directly, and the queue never used.
		return o, usagef("--write-mode behind needs a shared tier: give --s3-endpoint and --s3-bucket, or drop --write-mode")
	}
	// tiered.Config reads 0 as its default, and a negative bound refused
	// every upload with 503 upload_queue_full ("0 entries queued").
	if o.QueueEntries < 1 {
		return o, usagef("--upload-queue-entries %d: want at least 1 (default %d)", o.QueueEntries, tiered.DefaultMaxQueueEntries)
	}
	if o.QueueBytes < 1 {
		return o, usagef("--upload-queue-size %d: want at least 1 byte, e.g. 8GiB (the default)", o.QueueBytes)
	}
	if err := o.Redis.validate(o.MaxEntrySize); err != nil { // redis.go
		return o, err
	}
	return o, nil
}

// checkListenAddr refuses a listen address that is not host:port with a
// port number (or service name) before anything starts: "--addr 8080" has
// no colon and would otherwise be refused as a non-loopback address without
// authentication, and "127.0.0.1" would get as far as the listener.
func checkListenAddr(flagName, addr string) error {
	want := "want host:port, e.g. 127.0.0.1:8080 (port 0 picks a free port)"
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("%s %q is not host:port: %s", flagName, addr, want)
	}
	if n, err := strconv.Atoi(port); err == nil {
		if n < 0 || n > 65535 {
			return usagef("%s %q: port %d is out of range 0 to 65535", flagName, addr, n)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return usagef("%s %q: port %q is not a number: %s", flagName, addr, port, want)
	}
	return nil
}

// checkTLSFlags refuses a partial TLS configuration as a usage error (exit
// 2) before the store is opened, as every other flag combination is.
func checkTLSFlags(f auth.TLSFiles) error {
	switch {
	case f.Cert != "" && f.Key == "":
		return usagef("--tls-cert needs --tls-key: give the certificate's private key file too")
	case f.Key != "" && f.Cert == "":
		return usagef("--tls-key needs --tls-cert: give the certificate chain file too")
	case f.ClientCA != "" && f.Cert == "":
		return usagef("--tls-client-ca needs --tls-cert and --tls-key: client certificates are checked over HTTPS")
	}
	return nil
}

// newLogger returns a slog logger writing to w in format ("text", "json" or
// "auto": text when w is a terminal) at level.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("invalid --log-level %q: use debug, info, warn or error", level)
	}
	// Durations as "30s", not JSON's default of integer nanoseconds.
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			a.Value = slog.StringValue(a.Value.Duration().String())
		}
		return a
	}}
	switch format {
	case "auto":
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			return slog.New(slog.NewTextHandler(w, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("invalid --log-format %q: use text, json or auto", format)
}

// serve opens the store (answering probes with "starting" meanwhile),
// serves the API on o.Addr until ctx ends, then shuts down: it serves on
// for o.ShutdownDelay with /readyz failing, stops accepting, lets in-flight
// requests finish for up to o.ShutdownGrace, aborts the rest (an aborted
// upload stores nothing), gives the write-behind queue what is left of the
// grace to upload, and closes the store. ready, if non-nil, is called with
// the bound address once the server accepts connections.
func serve(ctx context.Context, o serveOptions, sio stdio, logger *slog.Logger, ready func(addr string)) (err error) {
	// SIGHUP's default action ends the process at once. Opening a large
	// store or reaching the bucket takes seconds, and a reload sent then
	// (systemctl reload, a config tool) killed serve with exit 129 and no
	// word: catch it first; the reload loop answers it once it runs.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// Tokens, TLS files and signing key first: a bad file, or serving
	// without auth beyond loopback, stops serve before anything opens.
	var sec api.Config
	if err := o.Security.apply(o.Addr, &sec, logger); err != nil { // security.go
		return err
	}
	if o.S3.enabled() {
		if o.shared, err = o.S3.config(o.MaxEntrySize, logger); err != nil { // fleet.go
			return err
		}
	}
	if o.Namespaces != "" {
		if o.quotas, err = loadNamespaces(o.Namespaces); err != nil { // namespaces.go
			return err
		}
		logger.Info("namespace quotas", "file", o.Namespaces, "namespaces", len(o.quotas.Namespaces), "default", !o.quotas.Default.IsZero())
	}
	// Listen first: a taken port fails before the store is opened.
	ln, err := listen("--addr", o.Addr) // listen.go
	if err != nil {
		return err
	}
	defer ln.Close()
	// Until the API serves, probes get an answer (starting.go).
	starting := answerWhileStarting(ln, sec.TLS, logger)
	defer starting.stop() // a start that fails ends it too
	// The profiling listener too, before anything is announced: a script
	// that reads the "serving on" line must not see a start that then
	// fails on a taken --pprof-addr.
	if o.PprofAddr != "" {
		_, stopPprof, err := servePprof(o.PprofAddr, logger) // pprof.go
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	rln, err := o.Redis.listen(o.Security.Tokens != "", o.Security.InsecureNoAuth) // redis.go
	if err != nil {
		return err
	}
	if rln != nil {
		defer rln.Close()
	}
	// What opens from here on closes at exit within a deadline
	// (shutdown.go): the end of the grace plus closeMargin once serving, or
	// closeMargin from a failed start.
	var closing closer
	var closeBy time.Time
	defer func() {
		if closeBy.IsZero() {
			closeBy = time.Now().Add(closeMargin)
		}
		if cerr := closing.closeAll(closeBy); cerr != nil && err == nil {
			err = cerr
		}
	}()
	// The store's hooks reach the statistics, which are opened after the
	// store (they sample its usage): evictions from the hot tier are
	// counted, those of the store's open too (statsHooks), and evicted and
	// quarantined entries leave the index that explains misses (a restore
	// puts an entry back: api/quarantine.go).
	var hooks statsHooks
	tierMetrics := api.NewTierMetrics()
	stores, err := openStores(ctx, o, logger, storeHooks{ // fleet.go
		onEvict:      hooks.evicted,
		onQuarantine: hooks.quarantined,
		observe:      tierMetrics.Observe,
	})
	if err != nil {
		return err
	}
	closing.dirErr = stores.hot.DirErr
	closing.add(closeStep{what: "store " + o.Data,
		// Stored entries are in Badger's write-ahead log, which the next
		// start on the same directory replays: only the batched access
		// times are Close's to write.
		lost:     "access times of its last " + store.DefaultFlushInterval.String() + ", which order evictions",
		close:    func(context.Context) error { return stores.close() },
		needsDir: true})
	sts, err := openStats(o.Data, stores.api, logger) // stats.go
	if err == nil {
		closeSts := closeStats // read now: a close left running may outlive serve
		closing.add(closeStep{what: "statistics " + filepath.Join(o.Data, "stats"),
			lost:     "counters since their last save, at most " + stats.DefaultFlushInterval.String(),
			close:    func(context.Context) error { return closeSts(sts) },
			wait:     statsCloseWait, // a hang must not keep the store below from closing
			needsDir: true,
			dirErr:   sts.DirErr}) // read-only alone, the data directory's look passes
	}
	if stores.tiered != nil {
		// Closed before the hot tier, whether or not that can close, and
		// before the statistics, whatever their Close does (it may
		// retry its flush until the deadline): its Close logs what the
		// upload queue still holds, the acknowledged entries that never
		// reached the bucket. The statistics' last sample of the store
		// reads the shared tier's usage from memory.
		closing.add(closeStep{what: "shared tier (upload queue " + filepath.Join(o.Data, "upload-queue") + ")",
			lost:  "the report of the entries still queued for upload, which stay on disk for the next start",
			close: func(context.Context) error { return stores.tiered.CloseShared() }})
	}
	if err != nil {
		return err
	}
	admitConfigured(sts, o.quotas)                     // namespaces.go
	hooks.attach(sts)                                  // after admitting: counted under their namespaces
	leases, runs := lease.Config{}, runsConfig(o.Data) // runs.go
	replicaID := ""
	if o.S3.enabled() {
		if replicaID, err = o.replicaID(); err != nil {
			return err
		}
		if err := openFleetState(&o, replicaID, &leases, &runs, logger); err != nil { // fleet.go
			return err
		}
	}
	pluginMetrics := api.NewPluginMetrics()
	o.Plugins.observe = pluginMetrics.Observe
	o.Plugins.loaded = pluginMetrics.Loaded
	keyer, host, closePlugins, err := openServeKeyer(ctx, o, logger) // plugin.go
	if err != nil {
		return err
	}
	closing.add(closeStep{what: "plugins (signature memo " + filepath.Join(o.Data, "signature-memo") + ")",
		lost:  "results since its last save: their digest-first lookups miss once after the restart",
		close: closePlugins})

	scheme := "http://"
	if sec.TLS != nil {
		scheme = "https://"
	}
	url := scheme + displayAddr(ln.Addr())
	var member *fleetMember
	var fcfg *fleetConfig
	if o.S3.enabled() {
		// fleetconfig.go; refresh waits for the built-ins
		fcfg = &fleetConfig{host: host, maxEntry: o.MaxEntrySize, nsPath: o.Namespaces, tokens: sec.Auth, signer: sec.Signer, log: logger}
		go fcfg.refresh()
		sample := func() registry.Sample {
			snap := sts.Snapshot(stats.SnapshotOptions{MaxRuns: 20, MaxTopEntries: 20})
			return registry.Sample{Hot: stores.hot.Usage(), Shared: stores.sharedState(), Stats: &snap, Config: fcfg.get()}
		}
		if member, err = joinFleet(o, replicaID, url, sample, logger); err != nil { // fleet.go
			return err
		}
		closing.add(closeStep{what: "fleet membership", apart: true,
			lost:  "the last heartbeat: the fleet lists this replica as stale rather than stopped until its heartbeat expires",
			close: func(ctx context.Context) error { member.close(ctx, logger); return nil }})
	}
	acfg := api.Config{
		Store:          stores.api,
		Seed:           stores.hot,
		Logger:         logger,
		MaxEntryBytes:  o.MaxEntrySize,
		Version:        appVersion(),
		Stats:          sts,
		Keyer:          keyer,
		Leases:         leases,
		Runs:           runs,
		Auth:           sec.Auth,
		Signer:         sec.Signer,
		TLS:            sec.TLS,
		Limits:         sec.Limits,
		TrustedProxies: sec.TrustedProxies,

		QuarantineAfter: o.QuarantineAfter,
		NoDigestLookups: !o.DigestLookups,
	}
	if member != nil {
		acfg.Fleet, acfg.Touch, acfg.SharedTier = member.reg, member.access.Touch, stores.sharedState
	}
	srv, err := api.New(acfg)
	if err != nil {
		return fmt.Errorf("create server: %w", err)
	}
	if err := srv.Registry().Register(pluginMetrics); err != nil {
		return fmt.Errorf("register plugin metrics: %w", err)
	}
	if member != nil {
		if err := srv.Registry().Register(member.heartbeatMetric()); err != nil { // fleet.go
			return fmt.Errorf("register fleet metrics: %w", err)
		}
		if err := srv.Registry().Register(fcfg); err != nil { // fleetconfig.go
			return fmt.Errorf("register fleet config metric: %w", err)
		}
	}
	if stores.tiered != nil {
		tierMetrics.Watch(stores.tiered)
		if err := srv.Registry().Register(tierMetrics); err != nil {
			return fmt.Errorf("register tier metrics: %w", err)
		}
	}

	var reloads []func(context.Context)
	if o.Plugins.Dir != "" {
		reloads = append(reloads, func(ctx context.Context) { reloadPluginDir(ctx, host, keyer, o.Plugins.Dir, logger, pluginMetrics) }) // plugin.go
	}
	if o.Namespaces != "" {
		nsReloads := api.NewNamespacesReloads()
		if err := srv.Registry().Register(nsReloads); err != nil {
			return fmt.Errorf("register namespaces reload metrics: %w", err)
		}
		reloads = append(reloads, func(context.Context) { reloadNamespaces(o.Namespaces, stores.hot, sts, logger, nsReloads) }) // namespaces.go
	}
	if fcfg != nil && (len(reloads) > 0 || sec.Auth != nil) { // after the reloads (tokens first): publish what they left in force
		reloads = append(reloads, func(context.Context) { fcfg.refresh() })
	}
	reloadOnSIGHUP(ctx, hup, logger, sec.Auth, reloads...) // security.go
	var redis *redisListener
	if rln != nil {
		if redis, err = o.Redis.start(rln, srv, acfg, keyer, logger); err != nil { // redis.go
			return err
		}
		// The store closes after this: no command may outlive it.
		defer redis.shutdown(context.Background(), logger)
	}
	// The API takes the listener over before "serving on" is printed: a
	// script that waits for that line must not get a 503 "starting".
	starting.stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(sio.Stdout, "cachesvc %s serving on %s (dashboard %s/, data %s)\n", appVersion(), url, url, o.Data)
	logger.Info("serving", "url", url, "data", o.Data, "max_size", o.MaxSize, "max_entry_size", o.MaxEntrySize, "sync_writes", o.SyncWrites)
	if o.S3.enabled() {
		fmt.Fprintf(sio.Stdout, "shared tier s3://%s/%s at %s (write mode %s)\n", o.S3.Bucket, o.S3.Prefix, o.S3.Endpoint, o.WriteMode)
		logger.Info("shared tier", "endpoint", o.S3.Endpoint, "bucket", o.S3.Bucket, "prefix", o.S3.Prefix, "write_mode", o.WriteMode)
	}

	if redis != nil {
		fmt.Fprintf(sio.Stdout, "redis protocol on redis://%s (namespace %s)\n", displayAddr(rln.Addr()), o.Redis.Namespace)
		logger.Info("redis protocol listener", "addr", rln.Addr().String(), "namespace", o.Redis.Namespace,
			"max_value", o.Redis.MaxValue, "max_conns", o.Redis.MaxConns)
	}

	if member != nil {
		member.start()
	}
	if ready != nil {
		ready(ln.Addr().String())
	}

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	drainFirst(srv, o.ShutdownDelay, logger) // drain.go
	logger.Info("shutting down", "grace", o.ShutdownGrace)
	sctx, cancel := graceContext(o.ShutdownGrace, logger) // drain.go
	defer cancel()
	rdone := make(chan struct{})
	go func() { redis.shutdown(sctx, logger); close(rdone) }() // within the same grace
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("shutdown incomplete", "err", err)
	}
	<-rdone
	if stores.tiered != nil {
		flushUploads(sctx, stores.tiered, logger) // drain.go
	}
	if err := <-errc; err != nil && !errors.Is(err, net.ErrClosed) {
		logger.Warn("serve ended", "err", err)
	}
	// The closes (deferred above) get what is left of the grace, plus
	// closeMargin; a second signal cut the grace short, so from now.
	closeBy = time.Now().Add(closeMargin)
	if d, ok := sctx.Deadline(); ok && sctx.Err() == nil {
		closeBy = d.Add(closeMargin)
	}
	return nil
}

// displayAddr renders a listener address for humans: an unspecified host
// (0.0.0.0, ::) becomes localhost.
func displayAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
