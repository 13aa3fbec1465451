package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/plugins"
)

// pluginOptions are the plugin flags shared by serve, key and plugin.
type pluginOptions struct {
	Dir          string
	CacheDir     string
	Timeout      time.Duration
	Memory       int64
	Pool         uint
	MaxSignature int64
	// observe, when set, receives every plugin call (serve: metrics).
	observe func(plugin string, d time.Duration, err error)
	// loaded, when set, receives the name@version of every plugin once
	// the server's plugins are ready (serve: metrics, whose failure series
	// then start at 0).
	loaded func(ids ...string)
	// memo, when set, is the fleet's shared signature memo (serve).
	memo keying.SharedMemo
	// memoFile, when set, keeps the signature memo across restarts (serve:
	// <data>/signature-memo).
	memoFile string
	// MemoEntries bounds the signature memo (and so its file): 0 means
	// keying.DefaultMemoEntries, negative turns the memo off (serve's
	// --signature-memo-entries).
	MemoEntries int
}

// addPluginFlags defines every plugin flag on fs (serve, key).
func addPluginFlags(fs *flag.FlagSet, o *pluginOptions) {
	addPluginDirFlag(fs, o)
	addPluginRuntimeFlags(fs, o)
	addPluginCallFlags(fs, o)
}

// addPluginDirFlag defines --plugins: the extra plugins to load.
func addPluginDirFlag(fs *flag.FlagSet, o *pluginOptions) {
	fs.StringVar(&o.Dir, "plugins", "", "`directory` of extra canonicalization plugins (*.wasm) loaded at start, besides the built-ins; serve reloads it on SIGHUP, all or nothing (a bad file keeps the plugins in force)")
}

// addPluginRuntimeFlags defines the flags of the plugin runtime itself:
// where compiled code is cached, and each call's time and memory limits.
func addPluginRuntimeFlags(fs *flag.FlagSet, o *pluginOptions) {
	fs.StringVar(&o.CacheDir, "wasm-cache", "", "`directory` for compiled plugin code (default: <data>/wasm-cache for serve, the user cache dir otherwise)")
	// plugins.Config reads a CallTimeout of 0 or less as its 10s default,
	// so 0 would quietly not mean "no limit": there is none to ask for.
	durationVar(fs, &o.Timeout, "plugin-timeout", plugins.DefaultCallTimeout, positiveDuration, "a positive duration, e.g. 10s (a plugin call is always bounded)", "wall-time limit of one plugin call (must be positive)")
	positiveSizeVar(fs, &o.Memory, "plugin-memory", plugins.DefaultMaxMemoryBytes, "memory limit of one plugin instance")
}

// maxPluginPool bounds --plugin-pool: each live instance may hold up to
// --plugin-memory, and no host has the cores to run more calls at once.
const maxPluginPool = 1024

// addPluginCallFlags defines the flags of keying calls: concurrency and the
// largest signature.
func addPluginCallFlags(fs *flag.FlagSet, o *pluginOptions) {
	// Refused past the bound (exit 2): it was quietly cut to it.
	uintVar(fs, &o.Pool, "plugin-pool", 0, maxPluginPool, fmt.Sprintf("0 (min(CPUs, 4)) to %d live instances per plugin", maxPluginPool),
		fmt.Sprintf("live instances per plugin, i.e. concurrent calls (0 = min(CPUs, 4); at most %d)", maxPluginPool))
	addMaxSignatureFlag(fs, o)
}

// addMaxSignatureFlag defines --max-signature-size.
func addMaxSignatureFlag(fs *flag.FlagSet, o *pluginOptions) {
	positiveSizeVar(fs, &o.MaxSignature, "max-signature-size", keying.DefaultMaxSignatureBytes, "largest signature accepted by keys and lookup; larger ones get 413 (the requests in progress hold at most 4 times this for their signatures; past it 503 too_many_signatures)")
}

// defaultWasmCache is the compilation cache of the offline commands.
func defaultWasmCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "cachesvc", "wasm-cache")
}

// openHost starts a plugin host with the built-ins and o.Dir loaded. With
// lazy and no o.Dir, the built-ins compile on first use instead (a server
// that never computes a key never compiles them).
func openHost(ctx context.Context, o pluginOptions, logger *slog.Logger, lazy bool) (*plugins.Host, error) {
	h, err := plugins.NewHost(ctx, plugins.Config{
		CacheDir:       o.CacheDir,
		MaxMemoryBytes: o.Memory,
		CallTimeout:    o.Timeout,
		MaxInputBytes:  o.MaxSignature,
		PoolSize:       int(o.Pool), // at most maxPluginPool: the flag refuses more
		Logger:         logger,
		Observe:        o.observe,
	})
	if err != nil {
		return nil, err
	}
	if lazy && o.Dir == "" {
		h.DeferBuiltins()
		return h, nil
	}
	if err := h.LoadBuiltins(ctx); err != nil {
		h.Close(ctx)
		return nil, withMemoryHint(err, o.Memory)
	}
	if o.Dir != "" {
		if _, err := h.LoadDir(ctx, o.Dir); err != nil {
			err = withMemoryHint(err, o.Memory)
			h.Close(ctx)
			return nil, err
		}
	}
	return h, nil
}

// withMemoryHint names the flag that fixes err when a larger plugin memory
// limit would.
func withMemoryHint(err error, limit int64) error {
	if errors.Is(err, plugins.ErrMemory) {
		return fmt.Errorf("%w (raise --plugin-memory, now %s; the default is %s)", err, formatSize(limit), formatSize(plugins.DefaultMaxMemoryBytes))
	}
	return err
}

// openKeyer starts a plugin host and a Keyer over it; close the host when done.
func openKeyer(ctx context.Context, o pluginOptions, logger *slog.Logger, keepCanonical, lazy bool) (*keying.Keyer, *plugins.Host, error) {
	h, err := openHost(ctx, o, logger, lazy)
	if err != nil {
		return nil, nil, err
	}
	k, err := keying.New(keying.Config{Host: h, MaxSignatureBytes: o.MaxSignature, KeepCanonical: keepCanonical,
		SharedMemo: o.memo, MemoEntries: o.MemoEntries, MemoFile: o.memoFile, Logger: logger})
	if err != nil {
		h.Close(ctx)
		return nil, nil, err
	}
	return k, h, nil
}

// openServeKeyer starts the server's plugins (compiled code cached under
// <data>/wasm-cache unless --wasm-cache says otherwise) and its Keyer.
func openServeKeyer(ctx context.Context, o serveOptions, logger *slog.Logger) (*keying.Keyer, *plugins.Host, func(context.Context) error, error) {
	po := o.Plugins
	if po.CacheDir == "" {
		po.CacheDir = filepath.Join(o.Data, "wasm-cache")
	}
	po.memoFile = filepath.Join(o.Data, "signature-memo")
	k, h, err := openKeyer(ctx, po, logger, false, true)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("start plugins: %w", err)
	}
	if po.Dir != "" {
		for _, i := range h.Plugins() {
			logger.Info("plugin ready", "plugin", i.ID, "backends", i.Backends, "source", i.Source)
		}
	}
	// Compile the built-ins now, in the background, rather than on the first
	// key request: a cold compile takes seconds, longer than a trainer's
	// lookup budget. /readyz answers 503 until it is done.
	go func() {
		start := time.Now()
		if err := h.Ready(); err != nil {
			logger.Error("built-in plugins failed to load; key and lookup requests will fail", "err", withMemoryHint(err, po.Memory))
			return
		}
		logger.Info("built-in plugins ready", "backends", h.Backends(), "took", time.Since(start).Round(time.Millisecond))
		if po.loaded != nil {
			var ids []string
			for _, i := range h.Plugins() {
				ids = append(ids, i.ID)
			}
			po.loaded(ids...)
		}
	}()
	return k, h, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := k.Close(ctx); err != nil { // drains the shared memo's writes
			logger.Warn("write the shared signature memo", "err", err)
		}
		if h.Compiling() {
			// A stop soon after the start: Close would wait for the
			// compile, past --shutdown-grace on a loaded host, for
			// nothing the next start needs (see Host.Compiling).
			logger.Info("built-in plugins still compiling at exit: not waited for; the next start compiles what did not finish")
			return nil
		}
		h.Close(context.Background())
		return nil
	}, nil
}

// sameVersionHint is what the warning of a plugin file replaced under the
// same name@version says: where its keys may now differ, and what to do.
const sameVersionHint = "the new code serves from now on, but keys hash only name@version: if it canonicalizes a signature " +
	"differently, that signature now gets another key than the stored entries the old code keyed (they miss); " +
	"this server forgot the keys its memo had from the old code (logged as memo_forgotten), and neither its memo file nor " +
	"the fleet's shared memo answers with another build's keys (each result records its code's sha256), " +
	"but replicas or 'cachesvc key' still on the old file make the old keys; bump version in the plugin's describe when its " +
	"canonical bytes change (a rebuild that canonicalizes as before needs nothing)"

// pluginMemo is the signature memo a reload clears of a replaced plugin's
// results (*keying.Keyer).
type pluginMemo interface {
	// ForgetPlugin drops the results of plugin id and returns how many.
	ForgetPlugin(id string) int
}

// reloadPluginDir reloads the plugin directory dir into h (serve, on
// SIGHUP), logs the outcome in one line and counts it in m. A plugin whose
// file changed but whose version did not is loaded too (it may be a mere
// rebuild) with a warning of its own: nothing else would tell an operator
// that new code now answers under the old name@version. Its results are
// dropped from memo, which would otherwise hold them until each was next
// looked up (and found to come from other code, see keying/code.go).
func reloadPluginDir(ctx context.Context, h *plugins.Host, memo pluginMemo, dir string, logger *slog.Logger, m *api.PluginMetrics) {
	start := time.Now()
	r, err := h.ReloadDir(ctx, dir)
	m.ObserveReload(err)
	if err != nil {
		logger.Error("plugin reload failed; keeping the current plugins", "dir", dir, "err", err)
		return
	}
	var added, replaced, removed, unchanged []string
	for _, i := range r.Added {
		added = append(added, i.ID+" "+i.Source)
		m.Loaded(i.ID)
	}
	for _, x := range r.Replaced {
		replaced = append(replaced, x.Old.ID+" -> "+x.New.ID+" "+x.New.Source)
		m.Loaded(x.New.ID)
		if x.SameVersion() {
			forgot := memo.ForgetPlugin(x.New.ID)
			logger.Warn("plugin file changed but its version did not", "plugin", x.New.ID, "file", x.New.Source,
				"old_file", x.Old.Source, "memo_forgotten", forgot, "hint", sameVersionHint)
		}
	}
	for _, i := range r.Removed {
		removed = append(removed, i.ID+" "+i.Source)
	}
	for _, i := range r.Unchanged {
		unchanged = append(unchanged, i.ID)
	}
	logger.Info("plugins reloaded", "dir", dir, "added", added, "replaced", replaced, "removed", removed,
		"unchanged", unchanged, "took", time.Since(start).Round(time.Millisecond))
}

// parseInterspersed parses flags that may follow positional arguments and
// returns the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string, sio stdio) ([]string, error) {
	if err := parseFlags(fs, args, sio); err != nil {
		return nil, err
	}
	var pos []string
	rest := fs.Args()
	for len(rest) > 0 {
		pos = append(pos, rest[0])
		if err := parseArgs(fs, rest[1:]); err != nil {
			return nil, err
		}
		rest = fs.Args()
	}
	return pos, nil
}

// pluginGroup is `cachesvc plugin list|check`.
var pluginGroup = group{name: "plugin", summary: "List the canonicalization plugins, or check a plugin against the ABI (plugins/ABI.md).",
	subs: []command{
		{"list", "list the loaded plugins (built-ins and --plugins DIR)", runPluginList},
		{"check", "check that FILE.wasm conforms to the plugin ABI", runPluginCheck},
	}}

// runPlugin runs `cachesvc plugin list` and `cachesvc plugin check`.
func runPlugin(ctx context.Context, args []string, sio stdio) error {
	return pluginGroup.run(ctx, args, sio)
}

// runPluginList is `cachesvc plugin list`.
func runPluginList(ctx context.Context, args []string, sio stdio) error {
	var o pluginOptions
	var jsonOut bool
	fs := newFlagSet("plugin list", "List the loaded canonicalization plugins (built-ins and --plugins DIR).", sio)
	addPluginDirFlag(fs, &o)
	addPluginRuntimeFlags(fs, &o)
	fs.BoolVar(&jsonOut, "json", false, "print JSON instead of a table")
	if err := parseOperandless(fs, args, sio); err != nil {
		return err
	}
	if o.CacheDir == "" {
		o.CacheDir = defaultWasmCache()
	}
	h, err := openHost(ctx, o, slog.New(slog.DiscardHandler), false)
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	infos := h.Plugins()
	if jsonOut {
		return writeJSON(sio, infos)
	}
	tw := tabwriter.NewWriter(sio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tBACKENDS\tREADS\tINTERRUPT\tSOURCE")
	for _, i := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", i.ID, strings.Join(i.Backends, ","), strings.Join(i.Reads, ","), i.Interrupt, i.Source)
	}
	return tw.Flush()
}

// runPluginCheck is `cachesvc plugin check FILE.wasm`.
func runPluginCheck(ctx context.Context, args []string, sio stdio) error {
	var o pluginOptions
	var corpus string
	var jsonOut bool
	fs := newFlagSet("plugin check FILE.wasm", "Check that FILE.wasm conforms to plugins/ABI.md: describe is valid, canonicalize is deterministic (repeated calls, fresh instances), idempotent (via normalize) and within limits, and that no built-in claims its name or a backend. The module flags (--platform, ...) describe the corpus's bare modules.", sio)
	addPluginRuntimeFlags(fs, &o)
	addMaxSignatureFlag(fs, &o)
	fs.BoolVar(&jsonOut, "json", false, "print JSON instead of a table")
	fs.StringVar(&corpus, "corpus", "", "`directory` of signatures (*.json) and bare modules to check with (default: one {\"backend\": B} probe per backend)")
	xo := newModuleFlags(fs)
	pos, err := parseInterspersed(fs, args, sio)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one FILE.wasm, got %d arguments", len(pos))
	}
	if o.CacheDir == "" {
		o.CacheDir = defaultWasmCache()
	}
	wasm, err := os.ReadFile(pos[0])
	if err != nil {
		return fmt.Errorf("read plugin: %w", err)
	}
	logger := slog.New(slog.DiscardHandler)
	h, err := plugins.NewHost(ctx, plugins.Config{CacheDir: o.CacheDir, MaxMemoryBytes: o.Memory,
		CallTimeout: o.Timeout, MaxInputBytes: o.MaxSignature, PoolSize: 1, Logger: logger})
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	// Beside the built-ins, as serve loads it: a name or backend they claim
	// fails the check, not the deployment. Limits too small for the
	// built-ins (a tiny --plugin-memory) leave that unchecked, not the rest.
	builtinsErr := h.LoadBuiltins(ctx)
	var probes []plugins.Probe
	if corpus != "" {
		// Describe first to learn the backend bare modules are wrapped for.
		p, err := h.Compile(ctx, pos[0], wasm)
		if err != nil {
			return err
		}
		info := p.Info()
		p.Close(ctx)
		if probes, err = plugins.LoadCorpus(corpus, info, xo.fields()); err != nil {
			return err
		}
		if len(probes) == 0 {
			return fmt.Errorf("corpus %s holds no signature or module this plugin reads", corpus)
		}
	}
	rep, err := h.Check(ctx, pos[0], wasm, probes)
	if err != nil {
		return err
	}
	if builtinsErr != nil {
		rep.Results = append(rep.Results, plugins.CheckResult{Name: plugins.CheckLoadsBeside, Skipped: true,
			Detail: "not checked: " + builtinsErr.Error()})
	}
	if jsonOut {
		if err := writeJSON(sio, rep); err != nil {
			return err
		}
	} else {
		failed := 0
		for _, r := range rep.Results {
			mark := "ok  "
			switch {
			case r.Skipped:
				mark = "skip"
			case !r.OK:
				mark = "FAIL"
				failed++
			}
			fmt.Fprintf(sio.Stdout, "%s  %s", mark, r.Name)
			if r.Detail != "" {
				fmt.Fprintf(sio.Stdout, ": %s", r.Detail)
			}
			fmt.Fprintln(sio.Stdout)
		}
		fmt.Fprintf(sio.Stdout, "%s: %d checks, %d failed; slowest call %s\n", rep.Info.ID, len(rep.Results), failed, rep.Slowest.Round(time.Microsecond))
	}
	if !rep.OK {
		return fmt.Errorf("plugin %s does not conform to the ABI (see the FAIL lines)", rep.Info.ID)
	}
	return nil
}

// writeJSON writes v to stdout as indented JSON.
func writeJSON(sio stdio, v any) error {
	enc := json.NewEncoder(sio.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
