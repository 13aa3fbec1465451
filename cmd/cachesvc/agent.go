package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cachesvc/cachesvc/jaxcache"
	"github.com/cachesvc/cachesvc/jaxcache/jaxsync"
)

const agentSummary = `Watch a JAX cache directory written by stock JAX (jax_compilation_cache_dir)
and upload each new entry once it is complete, under JAX's own key (passthrough
backend, the JAX key as the entry's name). With --warm-run, first fill the
directory from that run's manifest. Restart-safe: what was uploaded is kept
in a state file (default <dir>/.cachesvc-agent.json). Stops on SIGINT/SIGTERM:
watching, that is a success (exit 0); --once or the pre-warm interrupted exits
130 (SIGINT) or 143 (SIGTERM). SIGHUP is logged and ignored (nothing to reload).`

func runAgent(ctx context.Context, args []string, sio stdio) error {
	// Operators send SIGHUP to a host's services to reload them; its
	// default action ended the agent at once (exit 129, no word). The agent
	// reads its flags once, so it has nothing to reload: caught from the
	// start, a SIGHUP is logged once the log exists, and ignored.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	fs := newFlagSet("agent", agentSummary, sio)
	var cf clientFlags
	cf.register(fs, "default", "`namespace` of the entries")
	cf.registerStall(fs)
	dir := fs.String("jax-cache-dir", "", "JAX cache `directory` to watch (created if missing; required)")
	run := fs.String("run", "", "tag uploads with this `run` id (X-Cachesvc-Run), so a later 'cachesvc warm --run' can fetch them")
	warmRun := fs.String("warm-run", "", "before watching, warm the directory from this `run`'s manifest")
	var verifyKey verifyKeyFlag
	fs.Var(&verifyKey, "verify-key", "with --warm-run: "+verifyKeyUsage)
	var interval time.Duration
	// Each poll lists and stats the whole directory: faster than 10ms
	// would only burn CPU.
	durationVar(fs, &interval, "interval", time.Second, 10*time.Millisecond, "10ms or more, e.g. 1s", "poll `interval` (at least 10ms)")
	state := fs.String("state-file", "", "`path` of the state file (default <dir>/.cachesvc-agent.json)")
	once := fs.Bool("once", false, "poll twice (one interval apart), upload what is complete, and exit")
	if err := parseOperandless(fs, args, sio); err != nil {
		return err
	}
	if *dir == "" {
		return usagef("--jax-cache-dir is required")
	}
	cl, err := cf.client(*run)
	if err != nil {
		return err
	}
	d, err := jaxcache.Open(*dir)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(sio.Stderr, nil))
	hupCtx, stopHUP := context.WithCancel(ctx)
	defer stopHUP()
	reloadOnSIGHUP(hupCtx, hup, log, nil, func(context.Context) { // security.go
		log.Info("SIGHUP: nothing to reload (the agent reads its flags only at start: restart it to change them); still running")
	})
	a, err := jaxsync.NewAgent(jaxsync.AgentConfig{Client: cl, Namespace: cf.NS, Dir: d, StatePath: *state, Interval: interval, Logger: log})
	if err != nil {
		return err
	}
	// CACHESVC_VERIFY_KEY, set for the trainers, is no reason to refuse.
	if *warmRun == "" && flagGiven(args, "verify-key") {
		return usagef("--verify-key checks what --warm-run fetches: give --warm-run too (uploads are signed by the server, not checked here)")
	}
	verify, err := signatureCheck(&verifyKey) // warm.go
	if err != nil {
		return err
	}
	if *warmRun != "" {
		wcl, err := cf.client("")
		if err != nil {
			return err
		}
		res, err := warmDir(ctx, wcl, cf.NS, d, *warmRun, "", jaxsync.DefaultChunkSize, verify, sio, log)
		if err != nil {
			return fmt.Errorf("pre-warm: %w", serverHint(err, cf.Server))
		}
		fmt.Fprintln(sio.Stdout, res)
		if err := a.MarkPresent(); err != nil {
			return fmt.Errorf("pre-warm: %w", err)
		}
	}
	log.Info("agent watching", "dir", d.Path(), "namespace", cf.NS, "server", cf.Server, "run", *run, "already_uploaded", a.Uploaded())
	if *once {
		var total jaxsync.AgentStats
		for i := 0; i < 2; i++ {
			if i > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
			}
			st, err := a.Poll(ctx)
			if err != nil {
				return serverHint(err, cf.Server)
			}
			total.Uploaded += st.Uploaded
			total.Failed = st.Failed
			total.Pending = st.Pending
		}
		fmt.Fprintf(sio.Stdout, "agent: %d uploaded, %d pending, %d failed\n", total.Uploaded, total.Pending, total.Failed)
		if total.Failed > 0 {
			return fmt.Errorf("%d uploads failed", total.Failed)
		}
		return nil
	}
	// Watching runs until SIGINT/SIGTERM: that stop is its success (exit
	// 0), as serve's; an interrupted --once or pre-warm exits 130/143.
	sio.markDaemon() // interrupt.go
	return a.Run(ctx)
}
