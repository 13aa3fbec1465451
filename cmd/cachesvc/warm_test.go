package main

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
)

// keyedServer is a real server with the built-in plugins (POST /keys works).
func keyedServer(t *testing.T) *apitest.Server {
	t.Helper()
	k := keyingtest.Keyer(t, plugins.Config{}, keying.Config{})
	return apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Keyer = k }})
}

// jaxFile is a JAX-like cache value: zlib(4-byte compile seconds ‖ payload).
func jaxFile(payload string) []byte {
	var out bytes.Buffer
	w := zlib.NewWriter(&out)
	w.Write([]byte{0, 0, 0, 2})
	w.Write([]byte(payload))
	w.Close()
	return out.Bytes()
}

func jaxName(i int) string {
	h := sha256.Sum256([]byte(fmt.Sprint("cmd", i)))
	return fmt.Sprintf("jit_g%d-%s", i, hex.EncodeToString(h[:]))
}

// TestAgentThenWarm runs the two commands end to end: the agent uploads a
// directory tagged with a run, warm fills another directory from that run.
func TestAgentThenWarm(t *testing.T) {
	srv := keyedServer(t)
	src := t.TempDir()
	for i := 0; i < 3; i++ {
		os.WriteFile(filepath.Join(src, jaxName(i)+"-cache"), jaxFile(strings.Repeat("x", 1000*i)), 0o644)
	}
	code, out, errOut := runCmd(t, "agent", "--server", srv.URL, "--jax-cache-dir", src, "--run", "arm-a", "--once", "--interval", "20ms")
	if code != 0 || !strings.Contains(out, "3 uploaded") {
		t.Fatalf("agent: exit %d\n%s\n%s", code, out, errOut)
	}
	dst := filepath.Join(t.TempDir(), "new", "dir")
	code, out, errOut = runCmd(t, "warm", "--server", srv.URL, "--run", "arm-a", "--jax-cache-dir", dst)
	if code != 0 || !strings.Contains(out, "3 requested, 3 written") {
		t.Fatalf("warm: exit %d\n%s\n%s", code, out, errOut)
	}
	for i := 0; i < 3; i++ {
		got, err := os.ReadFile(filepath.Join(dst, jaxName(i)+"-cache"))
		want, _ := os.ReadFile(filepath.Join(src, jaxName(i)+"-cache"))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %v", jaxName(i), err)
		}
	}
	// Again: everything present, nothing fetched.
	if code, out, _ = runCmd(t, "warm", "--server", srv.URL, "--run", "arm-a", "--jax-cache-dir", dst); code != 0 || !strings.Contains(out, "3 already present") {
		t.Fatalf("second warm: exit %d %s", code, out)
	}
	// An agent that pre-warms a new directory fetches the run and uploads
	// nothing back.
	dst3 := t.TempDir()
	code, out, errOut = runCmd(t, "agent", "--server", srv.URL, "--jax-cache-dir", dst3, "--warm-run", "arm-a", "--once", "--interval", "20ms")
	if code != 0 || !strings.Contains(out, "3 written") || !strings.Contains(out, "0 uploaded") {
		t.Fatalf("agent --warm-run: exit %d\n%s\n%s", code, out, errOut)
	}
	// A manifest file saved from the server works too.
	cl, _ := client.New(client.Config{BaseURL: srv.URL})
	resp, err := cl.Manifest(context.Background(), "default", "arm-a")
	if err != nil {
		t.Fatal(err)
	}
	mf := filepath.Join(t.TempDir(), "manifest.json")
	var keys []string
	for _, k := range resp.Keys {
		keys = append(keys, `"`+k.Key+`"`)
	}
	os.WriteFile(mf, []byte(`{"keys":[`+strings.Join(keys, ",")+`]}`), 0o644)
	dst2 := t.TempDir()
	t.Setenv("CACHESVC_RUN", "the-current-run") // set by launchers for clients: not a source here
	if code, out, errOut = runCmd(t, "warm", "--server", srv.URL, "--manifest", mf, "--jax-cache-dir", dst2); code != 0 || !strings.Contains(out, "3 written") {
		t.Fatalf("warm --manifest: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestWarmAgentBadInput(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	file := filepath.Join(t.TempDir(), "plainfile")
	os.WriteFile(file, []byte("x"), 0o644)
	badManifest := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(badManifest, []byte(`{"keys": ["nothex"]}`), 0o644)
	otherNS := filepath.Join(t.TempDir(), "team-a.json")
	os.WriteFile(otherNS, []byte(`{"run": "r", "namespace": "team-a", "keys": [{"key": "`+strings.Repeat("ab", 32)+`"}]}`), 0o644)
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"neither run nor manifest", []string{"warm", "--server", srv.URL, "--jax-cache-dir", dir}, 2, "exactly one of --run or --manifest"},
		{"both run and manifest", []string{"warm", "--server", srv.URL, "--run", "r", "--manifest", badManifest, "--jax-cache-dir", dir}, 2, "exactly one of --run or --manifest"},
		{"empty url", []string{"warm", "--url", "", "--run", "r", "--jax-cache-dir", dir}, 2, "--url is empty"},
		{"no dir", []string{"warm", "--server", srv.URL, "--run", "r"}, 2, "--jax-cache-dir is required"},
		{"bad run id", []string{"warm", "--server", srv.URL, "--run", "a b", "--jax-cache-dir", dir}, 2, "invalid run id"},
		{"bad chunk size", []string{"warm", "--server", srv.URL, "--run", "r", "--chunk-size", "20000", "--jax-cache-dir", dir}, 2, "--chunk-size"},
		{"bad namespace", []string{"warm", "--server", srv.URL, "--ns", "Bad NS", "--run", "r", "--jax-cache-dir", dir}, 2, "namespace"},
		{"dir not writable", []string{"warm", "--server", srv.URL, "--run", "r", "--jax-cache-dir", filepath.Join(file, "sub")}, 1, "jax cache dir is not writable"},
		{"unknown run", []string{"warm", "--server", srv.URL, "--run", "never-seen", "--jax-cache-dir", dir}, 1, "unknown_run"},
		{"malformed manifest", []string{"warm", "--server", srv.URL, "--manifest", badManifest, "--jax-cache-dir", dir}, 1, "keys[0]"},
		{"manifest of another namespace", []string{"warm", "--server", srv.URL, "--manifest", otherNS, "--jax-cache-dir", dir}, 1, `is of namespace "team-a", not "default": give --namespace team-a`},
		{"missing manifest", []string{"warm", "--server", srv.URL, "--manifest", badManifest + ".nope", "--jax-cache-dir", dir}, 1, "no such file"},
		{"torch without run", []string{"warm", "--torch", "--server", srv.URL}, 2, "--torch needs --run"},
		{"torch with jax dir", []string{"warm", "--torch", "--server", srv.URL, "--run", "r", "--jax-cache-dir", dir}, 2, "--manifest and --jax-cache-dir are for JAX"},
		{"torch with manifest", []string{"warm", "--torch", "--server", srv.URL, "--manifest", badManifest}, 2, "--manifest and --jax-cache-dir are for JAX"},
		{"torch bad run", []string{"warm", "--torch", "--server", srv.URL, "--run", "a b"}, 2, "invalid run id"},
		{"torch empty url", []string{"warm", "--torch", "--server", "", "--run", "r"}, 2, "--url is empty"},
		{"torch no python", []string{"warm", "--torch", "--server", srv.URL, "--run", "r", "--python", "no-such-python3"}, 1, `--torch: Python interpreter "no-such-python3" not found`},
		{"agent no dir", []string{"agent", "--server", srv.URL}, 2, "--jax-cache-dir is required"},
		{"agent dir not writable", []string{"agent", "--server", srv.URL, "--jax-cache-dir", file}, 1, "jax cache dir is not writable"},
		{"agent tiny interval", []string{"agent", "--server", srv.URL, "--jax-cache-dir", dir, "--interval", "1ms"}, 2, "--interval"},
		{"agent unknown warm run", []string{"agent", "--server", srv.URL, "--jax-cache-dir", dir, "--warm-run", "nope", "--once"}, 1, "unknown_run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr %q (stdout %q); want exit %d and %q", code, errOut, out, tt.code, tt.want)
			}
		})
	}
}

// TestWarmTorchWithoutTheClientPackage: --python names a real interpreter
// that lacks the cachesvc package (the default python3, not the training
// venv's). warm says which interpreter and how to fix it, not "exited with
// status 1", the status `cachesvc.torch load` gives when the run has no
// blob.
func TestWarmTorchWithoutTheClientPackage(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	t.Setenv("PYTHONPATH", t.TempDir()) // not this repository's clients/python
	if exec.Command(py, "-c", "import cachesvc").Run() == nil {
		t.Skip(py + " has the cachesvc package installed")
	}
	srv := apitest.Start(t, apitest.Options{})
	code, out, errOut := runCmd(t, "warm", "--torch", "--server", srv.URL, "--run", "r", "--python", py)
	if code != 1 || !strings.Contains(errOut, py+" has no cachesvc package") || !strings.Contains(errOut, "pip install ./clients/python") {
		t.Fatalf("exit %d, stderr %q (stdout %q); want exit 1 saying %s has no cachesvc package and how to install it", code, errOut, out, py)
	}
}
