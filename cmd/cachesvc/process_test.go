package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildBinary builds cachesvc into a temporary directory of t.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cachesvc")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	return bin
}

// testWasmCache is the compiled-plugin cache the tests share (the user
// cache dir, as the offline commands use), so that only the first server
// of a run pays for compiling the built-in plugins.
func testWasmCache(t *testing.T) string {
	if dir := defaultWasmCache(); dir != "" {
		return dir
	}
	return filepath.Join(os.TempDir(), "cachesvc-test-wasm-cache")
}

// proc is a `cachesvc serve` subprocess.
type proc struct {
	cmd    *exec.Cmd
	url    string
	stdout *syncBuffer // every line the process has printed
	stderr *syncBuffer
	exited chan struct{}
}

// startServer runs `bin serve` on a free port with data dir and extra flags,
// and waits until it prints its URL.
func startServer(t *testing.T, bin, data string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data, "--log-format", "json", "--log-level", "warn",
		"--wasm-cache", testWasmCache(t)}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GOGC=100")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = p.stdout.Write(append(sc.Bytes(), '\n'))
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.kill(); checkStderr(t, p.stderr.String()) }) // errcheck_test.go
	select {
	case p.url = <-urlc:
	case <-p.exited:
		t.Fatalf("cachesvc serve exited before serving:\n%s", p.stderr.String())
	case <-time.After(5 * time.Minute): // a cold plugin compile takes a while
		t.Fatalf("cachesvc serve did not start:\n%s", p.stderr.String())
	}
	return p
}

// kill sends SIGKILL and waits for the process to exit.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop sends SIGTERM and waits up to d for a clean exit.
func (p *proc) stop(t *testing.T, d time.Duration) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("cachesvc serve exited %d after SIGTERM:\n%s", code, p.stderr.String())
		}
	case <-time.After(d):
		t.Errorf("cachesvc serve did not exit within %s of SIGTERM", d)
		p.kill()
	}
}

// terminate sends SIGTERM and waits up to within for the process to exit
// (failing the test past that), and returns its exit code and stderr.
func (p *proc) terminate(t *testing.T, within time.Duration) (code int, stderr string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(within):
		t.Fatalf("serve did not exit within %s of SIGTERM:\n%s", within, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode(), p.stderr.String()
}

// rssAnon returns the process's anonymous resident memory in bytes, from
// /proc/PID/status.
func (p *proc) rssAnon(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatalf("read status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			f := strings.Fields(rest) // "12345 kB"
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				t.Fatalf("parse %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssAnon in /proc status")
	return 0
}
