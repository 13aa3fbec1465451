package main

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/auth/authtest"
)

// readmeNginxBlock returns the nginx configuration of README.md's "Behind
// a reverse proxy" section.
func readmeNginxBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Behind a reverse proxy\n")
	if !ok {
		t.Fatal(`README.md has no "## Behind a reverse proxy" section`)
	}
	_, block, ok := strings.Cut(sec, "```nginx\n")
	if !ok {
		t.Fatal("README.md's proxy section has no ```nginx block")
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// nginxPath finds nginx, or skips the test (fails with
// CACHESVC_REQUIRE_NGINX set).
func nginxPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CACHESVC_REQUIRE_NGINX") != "" {
		t.Fatal("nginx not found and CACHESVC_REQUIRE_NGINX is set: apt-get install -y nginx")
	}
	t.Skip("nginx not found: apt-get install -y nginx to run README's reverse proxy configuration (CACHESVC_REQUIRE_NGINX=1 makes this a failure)")
	return ""
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startNginx runs nginx in the foreground on README's block, its upstream
// at backend (host:port) and its TLS listener on a free port with pki's
// server certificate, and with the further replacements in edits (old,
// new); it returns the listener's address.
func startNginx(t *testing.T, backend string, pki authtest.PKI, edits ...[2]string) string {
	t.Helper()
	bin := nginxPath(t)
	addr := freePort(t)
	conf := readmeNginxBlock(t)
	for _, r := range append([][2]string{
		{"server 127.0.0.1:8080;", "server " + backend + ";"},
		{"listen 443 ssl;", "listen " + addr + " ssl;"},
		{"/etc/nginx/cachesvc.pem", pki.ServerCert},
		{"/etc/nginx/cachesvc-key.pem", pki.ServerKey},
	}, edits...) {
		if !strings.Contains(conf, r[0]) {
			t.Fatalf("README's nginx block no longer has %q, which the test replaces: update the test with it", r[0])
		}
		conf = strings.ReplaceAll(conf, r[0], r[1])
	}
	dir := t.TempDir()
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n" // workers would drop to nobody, who cannot read the test's files
	}
	main := fmt.Sprintf("%sworker_processes 1;\npid %s/nginx.pid;\nerror_log %s/error.log info;\nevents { worker_connections 64; }\nhttp {\naccess_log off;\n"+
		"client_body_temp_path %s/body;\nproxy_temp_path %s/proxy;\nfastcgi_temp_path %s/fcgi;\nuwsgi_temp_path %s/uwsgi;\nscgi_temp_path %s/scgi;\n%s\n}\n",
		user, dir, dir, dir, dir, dir, dir, dir, conf)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;")
	// A file, not a pipe: the workers inherit it, and Wait would wait for
	// a pipe's last writer. Its own process group: the workers go with it.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	out := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "stderr.log"))
		e, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return string(b) + string(e)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		select {
		case err := <-exited:
			t.Fatalf("nginx exited (%v): %s", err, out())
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nginx did not listen on %s: %s", addr, out())
	return ""
}

// TestREADMEProxySnippet runs README's nginx configuration (TLS, the
// /cachesvc/ prefix) in front of `cachesvc serve --trusted-proxies
// 127.0.0.1` and uses cachesvc through it as a platform team would: uploads
// over nginx's default 1 MB limit with and without Content-Length, a range
// GET, HEAD, cachesvc's own JSON 413, the forwarded client recorded as the
// writer, the dashboard, and the CLI's stats, export and import with an
// https URL that has the prefix and a private CA.
func TestREADMEProxySnippet(t *testing.T) {
	nginxPath(t)
	pki := authtest.NewPKI(t)
	backend := startServe(t, "--trusted-proxies", "127.0.0.1", "--max-entry-size", "16MiB")
	proxy := "https://" + startNginx(t, strings.TrimPrefix(backend, "http://"), pki)
	base := proxy + "/cachesvc"
	hc := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	do := func(method, url string, body io.Reader, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, url, body)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := body.(*bytes.Reader); ok {
			req.ContentLength = int64(r.Len())
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: read body: %v", method, url, err)
		}
		return resp, b
	}

	data := make([]byte, 8<<20)
	rand.Read(data)
	keyA, keyB := strings.Repeat("a1", 32), strings.Repeat("b2", 32)
	// Content-Length, from a client behind an outer balancer that already
	// set X-Forwarded-For; nginx appends its peer (127.0.0.1, trusted).
	resp, body := do("PUT", base+"/v1/default/entries/"+keyA, bytes.NewReader(data), "X-Forwarded-For", "203.0.113.9")
	if resp.StatusCode != 201 {
		t.Fatalf("PUT 8 MiB with Content-Length through nginx = %d %s", resp.StatusCode, body)
	}
	if w := resp.Header.Get("X-Cachesvc-Writer"); w != "203.0.113.9" {
		t.Errorf("writer through the trusted proxy = %q, want the forwarded client 203.0.113.9", w)
	}
	// Chunked: no Content-Length.
	resp, body = do("PUT", base+"/v1/default/entries/"+keyB, io.MultiReader(bytes.NewReader(data[:6<<20])))
	if resp.StatusCode != 201 {
		t.Fatalf("PUT 6 MiB chunked through nginx = %d %s", resp.StatusCode, body)
	}
	resp, body = do("GET", base+"/v1/default/entries/"+keyA, nil)
	if resp.StatusCode != 200 || !bytes.Equal(body, data) {
		t.Fatalf("GET through nginx = %d, %d bytes (want 200, the 8 MiB uploaded)", resp.StatusCode, len(body))
	}
	resp, body = do("GET", base+"/v1/default/entries/"+keyB, nil, "Range", "bytes=10-19")
	if resp.StatusCode != 206 || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 10-19/%d", 6<<20) || !bytes.Equal(body, data[10:20]) {
		t.Errorf("range GET through nginx = %d %q %d bytes", resp.StatusCode, resp.Header.Get("Content-Range"), len(body))
	}
	resp, _ = do("HEAD", base+"/v1/default/entries/"+keyA, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Length") != fmt.Sprint(8<<20) {
		t.Errorf("HEAD through nginx = %d, Content-Length %q", resp.StatusCode, resp.Header.Get("Content-Length"))
	}
	big := make([]byte, 17<<20)
	resp, body = do("PUT", base+"/v1/default/entries/"+strings.Repeat("c3", 32), bytes.NewReader(big))
	var e struct{ Error struct{ Code string } }
	if resp.StatusCode != 413 || json.Unmarshal(body, &e) != nil || e.Error.Code != "entry_too_large" {
		t.Errorf("PUT over --max-entry-size through nginx = %d %.200s, want cachesvc's JSON 413 entry_too_large", resp.StatusCode, body)
	}
	resp, body = do("GET", base+"/", nil)
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`src="assets/app.js"`)) {
		t.Errorf("dashboard under the prefix = %d %.200s", resp.StatusCode, body)
	}
	if resp, _ = do("GET", base, nil); resp.StatusCode != 301 || !strings.HasSuffix(resp.Header.Get("Location"), "/cachesvc/") {
		t.Errorf("GET /cachesvc = %d to %q, want nginx's redirect to /cachesvc/", resp.StatusCode, resp.Header.Get("Location"))
	}

	// The CLI, as a separate process: a private CA reaches Go's TLS
	// through SSL_CERT_FILE, read once per process.
	bin := buildBinary(t)
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+pki.CACert, "CACHESVC_URL="+base)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cachesvc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := cli("stats"); !strings.Contains(out, base) || !strings.Contains(out, "2 entries") {
		t.Errorf("cachesvc stats through nginx:\n%s", out)
	}
	tarFile := filepath.Join(t.TempDir(), "default.tar")
	cli("admin", "export", "--namespace", "default", "-o", tarFile)
	if out := cli("admin", "import", tarFile, "--namespace", "copy"); !strings.Contains(out, "imported 2 entries") {
		t.Errorf("cachesvc admin import of a 14 MiB export through nginx:\n%s", out)
	}
	resp, body = do("GET", base+"/v1/copy/entries/"+keyA, nil)
	if resp.StatusCode != 200 || !bytes.Equal(body, data) {
		t.Errorf("imported entry through nginx = %d, %d bytes", resp.StatusCode, len(body))
	}
}

// TestRequestIDThroughProxy: behind README's nginx configuration, the
// X-Request-Id a client sends reaches cachesvc and comes back, on a success
// and in an error's header and body; without one, the block's map gives
// the request nginx's $request_id (32 hex digits, never one cachesvc makes),
// so nginx's access log and cachesvc's log share it. A user behind the
// proxy can then quote the id that the operator finds in both logs.
// nginxRequestID matches nginx's $request_id.
var nginxRequestID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestRequestIDThroughProxy(t *testing.T) {
	nginxPath(t)
	pki := authtest.NewPKI(t)
	backend := startServe(t, "--trusted-proxies", "127.0.0.1")
	base := "https://" + startNginx(t, strings.TrimPrefix(backend, "http://"), pki) + "/cachesvc"
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool}}}
	missing := base + "/v1/default/entries/" + strings.Repeat("d4", 32)
	for _, tc := range []struct {
		name, url, sent string
		status          int
	}{
		{"success", base + "/healthz", "support-1234:a.b_c", 200},
		{"error", missing, "8c1f2e4a-5b6c-4d7e-8f90-a1b2c3d4e5f6", 404},
		{"error, none sent", missing, "", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.sent != "" {
				req.Header.Set("X-Request-Id", tc.sent)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			id := resp.Header.Get("X-Request-Id")
			if resp.StatusCode != tc.status || id == "" || tc.sent != "" && id != tc.sent {
				t.Fatalf("through nginx: %d X-Request-Id %q, want %d and the id sent (%q) or a new one", resp.StatusCode, id, tc.status, tc.sent)
			}
			if tc.sent == "" && !nginxRequestID.MatchString(id) {
				t.Fatalf("through nginx without an id: X-Request-Id %q, want nginx's $request_id (32 hex digits) that README's map sets", id)
			}
			if tc.status >= 400 {
				var e struct {
					Error struct {
						RequestID string `json:"request_id"`
					} `json:"error"`
				}
				if json.Unmarshal(body, &e) != nil || e.Error.RequestID != id {
					t.Errorf("error body through nginx %s: request_id is not the header's %q", body, id)
				}
			}
		})
	}
}
