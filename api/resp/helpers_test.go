package resp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/resp"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
)

// env is a real HTTP API server (real Badger store, real pt2 plugin) with
// a real RESP listener beside it.
type env struct {
	t    testing.TB
	api  *apitest.Server
	resp *resp.Server
	addr string
	done chan error
}

// options adjust the servers of start.
type options struct {
	dir  string      // the store's directory; a new temporary one when ""
	auth *auth.Guard // both servers check tokens with it
	api  func(*api.Config)
	resp func(*resp.Config)
}

// start starts both servers; they are shut down when t ends.
func start(t testing.TB, o options) *env {
	t.Helper()
	keyer := keyingtest.Keyer(t, plugins.Config{}, keying.Config{})
	a := apitest.Start(t, apitest.Options{Dir: o.dir, API: func(c *api.Config) {
		c.Keyer, c.Auth = keyer, o.auth
		if o.api != nil {
			o.api(c)
		}
	}})
	cfg := resp.Config{Store: a.Store, Outcomes: a.API.Outcomes(), Keyer: keyer, Registry: a.Registry, Version: "test", Auth: o.auth}
	if o.resp != nil {
		o.resp(&cfg)
	}
	srv, err := resp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, api: a, resp: srv, addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { e.done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("resp shutdown: %v", err)
		}
		if err := <-e.done; err != nil {
			t.Errorf("resp serve: %v", err)
		}
	})
	return e
}

// raw is a client that sends and reads RESP bytes exactly.
type raw struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func (e *env) dial() *raw {
	e.t.Helper()
	c, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return &raw{t: e.t, c: c, r: bufio.NewReader(c)}
}

// encode renders a command as a RESP array of bulk strings.
func encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// do sends a command and returns its reply as raw RESP text.
func (r *raw) do(args ...string) string {
	r.t.Helper()
	r.send(encode(args...))
	return r.reply()
}

// send writes bytes as they are.
func (r *raw) send(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatalf("send: %v", err)
	}
}

// reply reads one reply, nested ones included, as raw RESP text.
func (r *raw) reply() string {
	r.t.Helper()
	s, err := readReply(r.r)
	if err != nil {
		r.t.Fatalf("read reply: %v (read %q)", err, s)
	}
	return s
}

// readReply reads one RESP2 or RESP3 reply.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return line, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return line, fmt.Errorf("malformed reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_':
		return line, nil
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return line, err
		}
		if n < 0 {
			return line, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return line, err
		}
		return line + string(buf), nil
	case '*', '%':
		n, err := strconv.Atoi(body)
		if err != nil {
			return line, err
		}
		if line[0] == '%' {
			n *= 2
		}
		out := line
		for range n {
			s, err := readReply(r)
			out += s
			if err != nil {
				return out, err
			}
		}
		return out, nil
	}
	return line, fmt.Errorf("unknown reply type in %q", line)
}

// bulk is the RESP2 text of a bulk string.
func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// torchKey is a torch FX graph Redis key.
func torchKey(name string) string { return "pt2:fx-graph-v1::f" + name + "7a1c3e9b:c1" }

// torchValue is a value shaped as torch's FX graph cache writes it.
func torchValue(data string, ms int) string {
	return fmt.Sprintf(`{"data": "%s", "time_taken_ms": %d}`, data, ms)
}

// metric returns the value of a counter or gauge sample of the server's
// registry, such as `cachesvc_resp_commands_total{command="get",result="ok"}`,
// or -1 when absent. Labels are matched in the order written.
func (e *env) metric(series string) float64 {
	e.t.Helper()
	return e.metricIn(e.t, series)
}

// metricIn is metric failing t (a fuzz target's) instead of the env's.
func (e *env) metricIn(t testing.TB, series string) float64 {
	t.Helper()
	name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	mfs, err := e.api.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var parts []string
			for _, lp := range m.GetLabel() {
				parts = append(parts, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			if !sameLabels(parts, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return -1
}

// sameLabels compares rendered label pairs with a comma-separated list, in
// any order.
func sameLabels(parts []string, list string) bool {
	var want []string
	if list != "" {
		want = strings.Split(list, ",")
	}
	if len(parts) != len(want) {
		return false
	}
	have := map[string]bool{}
	for _, p := range parts {
		have[p] = true
	}
	for _, w := range want {
		if !have[w] {
			return false
		}
	}
	return true
}
