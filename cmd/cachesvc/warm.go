package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/jaxcache"
	"github.com/cachesvc/cachesvc/jaxcache/jaxsync"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/wire"
)

const warmSummary = `Fetch the entries a run used (from the server's run manifest, or from a
manifest file) with batch requests, and write them into a JAX cache directory
in JAX's own layout (<jax key>-cache and -atime), atomically, skipping entries
already there. Stock JAX pointed at the directory (jax_compilation_cache_dir)
then hits with no client code. Only entries whose name is a JAX cache key
(uploaded by 'cachesvc agent' or a client in jax-key mode) can be written.

With --torch, pre-fill torch.compile's local caches instead: the run's
Mega-Cache blob (cachesvc.torch.save) is fetched and loaded by
'--python -m cachesvc.torch load RUN', so that every process on this host
that shares the cache directory starts with the run's compiles.`

// flagGiven reports whether args set flag name on the command line.
func flagGiven(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func runWarm(ctx context.Context, args []string, sio stdio) error {
	fs := newFlagSet("warm", warmSummary, sio)
	var cf clientFlags
	cf.register(fs, "default", "`namespace` of the entries")
	cf.registerStall(fs)
	run := fs.String("run", "", "warm from this `run`'s manifest on the server")
	manifestFile := fs.String("manifest", "", "warm from this manifest `file` (JSON of GET /v1/{ns}/runs/{run}/manifest, or {\"keys\": [...]})")
	dir := fs.String("jax-cache-dir", "", "JAX cache `directory` to fill (created if missing; required)")
	chunk := fs.Int("chunk-size", jaxsync.DefaultChunkSize, "keys per batch request (at most 10000)")
	var verifyKey verifyKeyFlag
	fs.Var(&verifyKey, "verify-key", verifyKeyUsage)
	var tw torchWarm
	fs.BoolVar(&tw.enabled, "torch", false, "instead, pre-fill torch.compile's local caches from --run's Mega-Cache blob (saved by cachesvc.torch.save) by running --python -m cachesvc.torch load")
	fs.StringVar(&tw.python, "python", "python3", "with --torch: the `interpreter` that has torch and the cachesvc package")
	fs.StringVar(&tw.dir, "torch-cache-dir", "", "with --torch: torch's local cache `directory` to fill (TORCHINDUCTOR_CACHE_DIR; default torch's own)")
	if err := parseOperandless(fs, args, sio); err != nil {
		return err
	}
	if tw.enabled {
		if *manifestFile != "" || *dir != "" {
			return usagef("--torch warms from --run's Mega-Cache blob; --manifest and --jax-cache-dir are for JAX")
		}
		if *run == "" {
			return usagef("--torch needs --run (the run whose process called cachesvc.torch.save)")
		}
		if err := manifest.ValidateRun(*run); err != nil {
			return usagef("--run: %s", err)
		}
		keys, err := verifyKey.load() // verifykeys.go
		if err != nil {
			return err
		}
		return warmTorch(ctx, cf, tw, *run, keys, sio)
	}
	// CACHESVC_RUN often names the current run (clients tag requests with
	// it); with --manifest on the command line it is not a source.
	if *manifestFile != "" && *run != "" && !flagGiven(args, "run") {
		*run = ""
	}
	if *run != "" {
		if err := manifest.ValidateRun(*run); err != nil {
			return usagef("--run: %s", err)
		}
	}
	if (*run == "") == (*manifestFile == "") {
		return usagef("give exactly one of --run or --manifest")
	}
	if *dir == "" {
		return usagef("--jax-cache-dir is required")
	}
	if *chunk <= 0 || *chunk > jaxsync.MaxChunkSize {
		return usagef("--chunk-size must be 1 to %d, got %d", jaxsync.MaxChunkSize, *chunk)
	}
	verify, err := signatureCheck(&verifyKey)
	if err != nil {
		return err
	}
	cl, err := cf.client("")
	if err != nil {
		return err
	}
	d, err := jaxcache.Open(*dir)
	if err != nil {
		return err
	}
	res, err := warmDir(ctx, cl, cf.NS, d, *run, *manifestFile, *chunk, verify, sio, nil)
	if errors.Is(err, jaxsync.ErrRefused) {
		fmt.Fprintln(sio.Stdout, res)
	}
	if err != nil {
		return serverHint(err, cf.Server) // clientflags.go
	}
	fmt.Fprintln(sio.Stdout, res)
	return nil
}

// verifyKeyUsage is warm's and agent's --verify-key.
const verifyKeyUsage = "the server's public key `file` (FILE.pub of 'cachesvc signkey new', or the key itself in base64, as CACHESVC_VERIFY_KEY for the Python client): write only entries whose signature verifies with it; repeat it or separate keys by commas to trust several (the old and the new during a key rotation)"

// signatureCheck returns the check of --verify-key's keys for
// jaxsync.WarmConfig.Verify: nil without a key; with some, a member must
// carry a server's signature of its key and SHA-256 that verifies under
// one of them (the bytes are checked against that SHA-256 before their
// file appears).
func signatureCheck(verifyKey *verifyKeyFlag) (func(client.Member) error, error) {
	keys, err := verifyKey.load() // verifykeys.go
	if err != nil || keys == nil {
		return nil, err
	}
	return func(m client.Member) error {
		key, err := cachekey.ParseKey(m.Key)
		if err != nil {
			return err
		}
		sum, err := wire.ParseSHA256(m.SHA256)
		if err != nil {
			return fmt.Errorf("the server sent no valid sha256 for it: %w", err)
		}
		if m.Signature == "" {
			return errors.New("it is unsigned: the server has no --signing-key")
		}
		if _, ok := keys.verify(key, sum, m.Signature); !ok {
			return fmt.Errorf("its signature does not verify with %s: signed by another key, or altered", keys)
		}
		return nil
	}, nil
}

// warmDir loads the entries to warm and runs jaxsync.Warm with a progress
// bar when stderr is a terminal.
func warmDir(ctx context.Context, cl *client.Client, ns string, d *jaxcache.Dir, run, manifestFile string, chunk int, verify func(client.Member) error, sio stdio, log *slog.Logger) (jaxsync.WarmResult, error) {
	var wants []jaxsync.Want
	if manifestFile != "" {
		w, fileNS, err := jaxsync.ReadManifestFile(manifestFile)
		if err != nil {
			return jaxsync.WarmResult{}, err
		}
		if fileNS != "" && fileNS != ns {
			// Its keys would all be missing: a cold cache, and exit 0.
			return jaxsync.WarmResult{}, fmt.Errorf("manifest %s is of namespace %q, not %q: give --namespace %s", manifestFile, fileNS, ns, fileNS)
		}
		wants = w
	} else {
		m, err := cl.Manifest(ctx, ns, run)
		if err != nil {
			return jaxsync.WarmResult{}, fmt.Errorf("fetch manifest of run %q: %w", run, err)
		}
		if m.Truncated {
			fmt.Fprintf(sio.Stderr, "cachesvc warm: run %q's manifest was truncated by the server's bounds; warming the %d keys it kept\n", run, len(m.Keys))
		}
		wants = jaxsync.FromManifest(m)
	}
	cfg := jaxsync.WarmConfig{Client: cl, Namespace: ns, Dir: d, Entries: wants, ChunkSize: chunk, Logger: log, Verify: verify}
	var bar *progressbar.ProgressBar
	if isTerminal(sio.Stderr) {
		bar = progressbar.NewOptions(len(wants),
			progressbar.OptionSetWriter(sio.Stderr),
			progressbar.OptionSetDescription("warming "+d.Path()),
			progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		cfg.Progress = func(done, total int, _ int64) {
			bar.ChangeMax(total)
			_ = bar.Set(done)
		}
	}
	res, err := jaxsync.Warm(ctx, cfg)
	if bar != nil {
		_ = bar.Finish()
	}
	return res, err
}
