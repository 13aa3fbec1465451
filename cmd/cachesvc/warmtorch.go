package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/cachesvc/cachesvc/api/auth"
)

// torchWarm holds warm's --torch flags: pre-filling torch.compile's local
// caches from a run's Mega-Cache blob (cachesvc.torch.save in the run that
// compiled).
type torchWarm struct {
	enabled bool
	python  string
	dir     string
}

// warmTorch runs `<python> -m cachesvc.torch load RUN`: the blob is only
// valid for the torch, Triton and device of the process that loads it, and
// only torch.compiler.load_cache_artifacts can unpack it, so the work runs
// in the interpreter that will train. The server, namespace, token,
// client certificate and --verify-key's keys reach it as CACHESVC_URL,
// CACHESVC_NAMESPACE, CACHESVC_TOKEN, CACHESVC_CLIENT_CERT,
// CACHESVC_CLIENT_KEY and CACHESVC_VERIFY_KEY; --torch-cache-dir as
// TORCHINDUCTOR_CACHE_DIR. Its output is passed through; a non-zero exit
// fails warm.
func warmTorch(ctx context.Context, cf clientFlags, tw torchWarm, run string, keys verifyKeys, sio stdio) error {
	if _, err := cf.client(""); err != nil { // validates --url, --namespace, the token and the client certificate
		return err
	}
	token, err := cf.token.resolve()
	if err != nil {
		return err
	}
	py, err := exec.LookPath(tw.python)
	if err != nil {
		return fmt.Errorf("--torch: Python interpreter %q not found (%v); pass --python with the interpreter that has torch and the cachesvc package (pip install ./clients/python)", tw.python, err)
	}
	env := make([]string, 0, len(os.Environ())+4)
	for _, kv := range os.Environ() {
		// Ours win over inherited ones of the same name.
		// CACHESVC_VERIFY_KEY always goes: --verify-key read it and may
		// have replaced it, and it may name a .pub file, which Python
		// does not take; keys carries what --verify-key decided.
		if name, _, _ := strings.Cut(kv, "="); name == "CACHESVC_URL" || name == "CACHESVC_NAMESPACE" || name == "CACHESVC_TOKEN" ||
			name == "CACHESVC_CLIENT_CERT" || name == "CACHESVC_CLIENT_KEY" || name == "CACHESVC_VERIFY_KEY" ||
			(tw.dir != "" && name == "TORCHINDUCTOR_CACHE_DIR") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "CACHESVC_URL="+cf.Server, "CACHESVC_NAMESPACE="+cf.NS)
	if token != "" {
		env = append(env, "CACHESVC_TOKEN="+token)
	}
	if cf.certFile != "" {
		env = append(env, "CACHESVC_CLIENT_CERT="+cf.certFile, "CACHESVC_CLIENT_KEY="+cf.keyFile)
	}
	if keys != nil {
		// Python takes no key files: the keys themselves, in base64.
		b64 := make([]string, len(keys))
		for i, k := range keys {
			b64[i] = auth.EncodePublicKey(k.pub)
		}
		env = append(env, "CACHESVC_VERIFY_KEY="+strings.Join(b64, ","))
	}
	if tw.dir != "" {
		if err := os.MkdirAll(tw.dir, 0o755); err != nil {
			return fmt.Errorf("--torch: --torch-cache-dir: %w", err)
		}
		env = append(env, "TORCHINDUCTOR_CACHE_DIR="+tw.dir)
	}
	// Python exits 1 for a module it cannot find, the status `load` gives
	// for a run without a blob: ask first, in the same environment, so
	// that the usual mistake (the system python3, not the training venv's)
	// says how to fix it. find_spec imports only the stdlib-only package.
	probe := exec.CommandContext(ctx, py, "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('cachesvc.torch') is None)")
	probe.Env = env
	if err := probe.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 1 {
			return fmt.Errorf("--torch: %s has no cachesvc package: pass --python with the interpreter that has torch and the cachesvc package, or install it there (pip install ./clients/python)", py)
		}
		return fmt.Errorf("--torch: run %s: %w", py, err)
	}
	cmd := exec.CommandContext(ctx, py, "-m", "cachesvc.torch", "load", run)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = sio.Stdout, sio.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("--torch: %s -m cachesvc.torch load %s exited with status %d (its message is above)", py, run, exit.ExitCode())
		}
		return fmt.Errorf("--torch: run %s: %w", py, err)
	}
	return nil
}
