// Package s3test runs a real S3 server, versitygw on a posix directory, for
// tests of the S3-backed stores. Nothing here is a mock: requests go over
// loopback HTTP to a separate process speaking the S3 protocol.
//
// The binary is found through $CACHESVC_VERSITYGW or at
// $XDG_CACHE_HOME/cachesvc/bin/versitygw (scripts/test.sh builds it there).
// When it is missing the tests that need it skip, unless
// CACHESVC_REQUIRE_S3=1, which turns the skip into a failure so that CI cannot
// pass without running them.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Credentials of the server's root account.
const (
	AccessKey = "cachesvc-test"
	SecretKey = "cachesvc-test-secret"
	// Region is the region the server answers for.
	Region = "us-east-1"
)

// Binary returns the path of the versitygw binary, or an error saying how to
// get one.
func Binary() (string, error) {
	if p := os.Getenv("CACHESVC_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("CACHESVC_VERSITYGW=%s: %w", p, err)
		}
		return p, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the cache directory: %w", err)
	}
	p := filepath.Join(dir, "cachesvc", "bin", "versitygw")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("versitygw not found at %s (run scripts/test.sh, or set CACHESVC_VERSITYGW): %w", p, err)
	}
	return p, nil
}

// Server is one running S3 server process (versitygw, or SeaweedFS from
// StartSeaweedFS).
type Server struct {
	// Endpoint is host:port on 127.0.0.1.
	Endpoint string
	// Dir is the posix root: bucket b's object k is the file Dir/b/k.
	Dir string

	bin  string
	log  string
	args []string // the command's arguments after bin
	env  []string // added to the environment
	name string   // for messages

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a server on a free loopback port with a fresh posix directory
// and stops it when the test ends. It skips the test (or fails it under
// CACHESVC_REQUIRE_S3=1) when the binary is missing.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CACHESVC_REQUIRE_S3") == "1" {
			t.Fatalf("CACHESVC_REQUIRE_S3=1 but %v", err)
		}
		t.Skipf("no S3 server for this test: %v", err)
	}
	s := &Server{Dir: t.TempDir(), bin: bin, name: "versitygw"}
	s.env = []string{"ROOT_ACCESS_KEY=" + AccessKey, "ROOT_SECRET_KEY=" + SecretKey}
	s.log = filepath.Join(t.TempDir(), "versitygw.log")
	var lastErr error
	// The free port is found by listening and closing, so another process
	// may take it before versitygw binds it: try a few ports.
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s.Endpoint = fmt.Sprintf("127.0.0.1:%d", port)
		s.args = []string{"--port", s.Endpoint, "--quiet", "posix", s.Dir}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("start versitygw: %v", lastErr)
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the process on s.Endpoint and waits until it answers HTTP.
func (s *Server) start() error {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("%s on %s exited early (log: %s)", s.name, s.Endpoint, tail(s.log))
		default:
		}
		resp, err := http.Get("http://" + s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			s.mu.Lock()
			s.cmd, s.done = cmd, done
			s.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("%s on %s did not answer in 60s: %w", s.name, s.Endpoint, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// Stop stops the server (an outage, for tests of what happens without the
// shared tier). It is safe to call twice; Restart brings it back.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process handles no SIGTERM
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Pause stops the server process with SIGSTOP: its socket still accepts
// connections (the kernel completes them) but nothing answers, as with a
// hung gateway. Resume lets it go on; the test's end resumes it.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGSTOP)
	t.Cleanup(func() { s.signal(t, syscall.SIGCONT) })
	s.awaitStopped()
}

// awaitStopped waits (up to 5 s) until every thread of the server process
// is stopped: kill returns before the stop reaches a thread running on
// another CPU, which could still answer a request sent just after Pause.
// Where /proc is absent it returns at once.
func (s *Server) awaitStopped() {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	tasks := fmt.Sprintf("/proc/%d/task", cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		stats, err := filepath.Glob(tasks + "/*/stat")
		if err != nil || len(stats) == 0 {
			return
		}
		stopped := true
		for _, f := range stats {
			b, err := os.ReadFile(f)
			// The state follows the parenthesized command name: "pid (comm) T ...".
			if i := strings.LastIndexByte(string(b), ')'); err == nil && i >= 0 && i+2 < len(b) && b[i+2] != 'T' && b[i+2] != 't' {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
	}
}

// Resume continues a paused server.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGCONT)
}

func (s *Server) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return // stopped
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Errorf("signal %s %v: %v", s.name, sig, err)
	}
}

// Restart starts a stopped server again on the same port and directory.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("restart versitygw: %v", err)
	}
}

// RotateSecret stops the server and starts it again on the same port and
// directory with another root secret, so that clients still holding
// SecretKey are refused (SignatureDoesNotMatch), as after a key rotation.
func (s *Server) RotateSecret(t testing.TB, secret string) {
	t.Helper()
	s.Stop()
	s.env = append(s.env, "ROOT_SECRET_KEY="+secret) // the last one wins
	if err := s.start(); err != nil {
		t.Fatalf("restart versitygw with a new secret: %v", err)
	}
}

// Client returns a minio client for the server, with transport rt (nil for
// the default).
func (s *Server) Client(t testing.TB, rt http.RoundTripper) *minio.Client {
	t.Helper()
	c, err := minio.New(s.Endpoint, clientOptions(rt))
	if err != nil {
		t.Fatalf("minio client: %v", err)
	}
	return c
}

func clientOptions(rt http.RoundTripper) *minio.Options {
	return &minio.Options{
		Creds:        credentials.NewStaticV4(AccessKey, SecretKey, ""),
		Region:       Region,
		BucketLookup: minio.BucketLookupPath,
		Transport:    rt,
	}
}

// NewBucket creates a bucket with a fresh random name and returns the name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "test-" + hex.EncodeToString(b[:])
	s.EnsureBucket(t, name)
	return name
}

// EnsureBucket creates the bucket name unless it exists.
func (s *Server) EnsureBucket(t testing.TB, name string) {
	t.Helper()
	c := s.Client(t, nil)
	err := c.MakeBucket(context.Background(), name, minio.MakeBucketOptions{Region: Region})
	if err != nil {
		var e minio.ErrorResponse
		if errors.As(err, &e) && (e.Code == "BucketAlreadyOwnedByYou" || e.Code == "BucketAlreadyExists") {
			return
		}
		t.Fatalf("make bucket %s: %v", name, err)
	}
}

// ObjectPath returns the file holding object key of bucket in the posix
// directory, for tests that damage stored bytes behind the server's back.
func (s *Server) ObjectPath(bucket, key string) string {
	return filepath.Join(s.Dir, bucket, filepath.FromSlash(key))
}
