package resp_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/api/resp"
)

var (
	tokWriter = authtest.Token{Name: "ci-writer", Secret: "s3cr3t-writer-9f2c", Scopes: "default:write"}
	tokReader = authtest.Token{Name: "reader", Secret: "s3cr3t-reader-77aa", Scopes: "*:read"}
	tokOther  = authtest.Token{Name: "team-b", Secret: "s3cr3t-team-b-0c1d", Scopes: "team-b:write"}
)

// guard writes a tokens file (anonymous read in the namespaces listed) and
// returns its guard and path.
func guard(t *testing.T, anonymous string) (*auth.Guard, string) {
	t.Helper()
	path := authtest.WriteTokens(t, []authtest.Token{tokWriter, tokReader, tokOther}, anonymous)
	g, err := auth.NewGuard(path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return g, path
}

// TestAuth: with a tokens file, commands before AUTH get NOAUTH, a wrong
// token WRONGPASS, a token without the scope NOPERM, in every form redis
// clients send (AUTH token, AUTH user token, HELLO 3 AUTH user token).
func TestAuth(t *testing.T) {
	g, _ := guard(t, "")
	e := start(t, options{auth: g})
	k := torchKey("auth")
	const noauth = "-NOAUTH Authentication required.\r\n"
	const wrongpass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	cases := []struct {
		name  string
		steps []step
	}{
		{"before auth", []step{
			{[]string{"GET", k}, noauth},
			{[]string{"SET", k, "v"}, noauth},
			{[]string{"MGET", k}, noauth},
			{[]string{"EXISTS", k}, noauth},
			{[]string{"PING"}, noauth},
			{[]string{"SELECT", "0"}, noauth},
			{[]string{"CLIENT", "SETINFO", "LIB-NAME", "x"}, noauth},
			{[]string{"HELLO", "3"}, "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"},
			{[]string{"FLUSHALL"}, "-ERR unknown command 'FLUSHALL'; ..."},
		}},
		{"wrong token", []step{
			{[]string{"AUTH", "not-a-token"}, wrongpass},
			{[]string{"AUTH", "default", "not-a-token"}, wrongpass},
			{[]string{"HELLO", "3", "AUTH", "default", "not-a-token"}, wrongpass},
			{[]string{"AUTH", ""}, wrongpass},
			{[]string{"GET", k}, noauth},
		}},
		{"reader", []step{
			{[]string{"AUTH", tokReader.Secret}, "+OK\r\n"},
			{[]string{"GET", k}, "$-1\r\n"},
			{[]string{"EXISTS", k}, ":0\r\n"},
			{[]string{"SET", k, "v"}, "-NOPERM token 'reader' lacks write scope in namespace 'default'\r\n"},
			{[]string{"AUTH", "wrong"}, wrongpass},
			{[]string{"GET", k}, "$-1\r\n"}, // a failed AUTH keeps the token in force
		}},
		{"writer, user form", []step{
			{[]string{"AUTH", "whoever", tokWriter.Secret}, "+OK\r\n"},
			{[]string{"SET", k, "v"}, "+OK\r\n"},
			{[]string{"GET", k}, bulk("v")},
		}},
		{"hello auth", []step{
			{[]string{"HELLO", "3", "AUTH", "default", tokWriter.Secret, "SETNAME", "w"}, "%7\r\n..."},
			{[]string{"GET", k}, bulk("v")},
			{[]string{"CLIENT", "GETNAME"}, bulk("w")},
		}},
		{"other namespace", []step{
			{[]string{"AUTH", tokOther.Secret}, "+OK\r\n"},
			{[]string{"GET", k}, "-NOPERM token 'team-b' lacks read scope in namespace 'default'\r\n"},
			{[]string{"PING"}, "+PONG\r\n"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { converse(t, e.dial(), tc.steps) })
	}
	if v := e.metric(`cachesvc_resp_commands_total{command="get",result="noauth"}`); v != 2 {
		t.Errorf("noauth GETs counted %v, want 2", v)
	}
}

// TestAnonymousRead: a tokens file granting anonymous read in the namespace
// lets clients without a token read, never write.
func TestAnonymousRead(t *testing.T) {
	g, _ := guard(t, "default")
	e := start(t, options{auth: g})
	k := torchKey("anon")
	converse(t, e.dial(), []step{
		{[]string{"HELLO", "3"}, "%7\r\n..."},
		{[]string{"GET", k}, "_\r\n"},
		{[]string{"SET", k, "v"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"PING"}, "+PONG\r\n"},
	})
}

// TestTokenReload: a token removed from the tokens file stops working on
// connections that authenticated with it, at the next command.
func TestTokenReload(t *testing.T) {
	g, path := guard(t, "")
	e := start(t, options{auth: g})
	r := e.dial()
	k := torchKey("reload")
	converse(t, r, []step{{[]string{"AUTH", tokWriter.Secret}, "+OK\r\n"}, {[]string{"SET", k, "v"}, "+OK\r\n"}})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, tokWriter.Name+" ") {
			kept = append(kept, line)
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	converse(t, r, []step{{[]string{"GET", k}, "-NOAUTH the token AUTH accepted is no longer in the tokens file; AUTH again\r\n"}})
}

// TestGoRedisAuth: go-redis (RESP3 and HELLO ... AUTH by default, then
// RESP2 and AUTH) with a token works, and a wrong one fails to connect
// with redis's authentication error.
func TestGoRedisAuth(t *testing.T) {
	g, _ := guard(t, "")
	e := start(t, options{auth: g})
	ctx := context.Background()
	k := torchKey("goredis-auth")
	for _, proto := range []int{3, 2} {
		c := redis.NewClient(&redis.Options{Addr: e.addr, Password: tokWriter.Secret, Protocol: proto, MaxRetries: -1})
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("RESP%d SET: %v", proto, err)
		}
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "v" {
			t.Fatalf("RESP%d GET: %q, %v", proto, v, err)
		}
		if _, err := c.Get(ctx, torchKey("absent")).Result(); !errors.Is(err, redis.Nil) {
			t.Fatalf("RESP%d GET miss: %v, want redis.Nil", proto, err)
		}
		c.Close()
		bad := redis.NewClient(&redis.Options{Addr: e.addr, Password: "wrong", Protocol: proto, MaxRetries: -1})
		err := bad.Get(ctx, k).Err()
		if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Errorf("RESP%d wrong token: %v, want WRONGPASS", proto, err)
		}
		bad.Close()
	}
}

// TestTLS: with a TLS configuration the listener speaks RESP over TLS
// (rediss://) and a plain-text client gets nothing.
func TestTLS(t *testing.T) {
	pki := authtest.NewPKI(t)
	tc, err := auth.TLSFiles{Cert: pki.ServerCert, Key: pki.ServerKey}.Config()
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, options{resp: func(c *resp.Config) { c.TLS = tc }})
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: e.addr, TLSConfig: &tls.Config{RootCAs: pki.Pool, ServerName: "localhost"}, MaxRetries: -1})
	defer c.Close()
	k := torchKey("tls")
	if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	if v, err := c.Get(ctx, k).Result(); err != nil || v != "v" {
		t.Fatalf("GET over TLS: %q, %v", v, err)
	}
	plain := redis.NewClient(&redis.Options{Addr: e.addr, MaxRetries: -1, ReadTimeout: 2 * time.Second})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Error("a plain-text PING was answered by a TLS listener")
	}
}

// lockedBuf is a bytes.Buffer safe for the logger's concurrent writes.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRefusedAuthIsLogged: torch's Redis backend turns its remote cache off
// silently on NOAUTH or WRONGPASS, so the server's log says why the client
// gets no cache and how to give the token: NOAUTH once per connection (a
// GET without a password was not logged at all), WRONGPASS each time.
func TestRefusedAuthIsLogged(t *testing.T) {
	g, _ := guard(t, "")
	var logs lockedBuf
	e := start(t, options{auth: g, resp: func(c *resp.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	}})
	k := torchKey("logged")
	r := e.dial()
	converse(t, r, []step{
		{[]string{"GET", k}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"SET", k, "v"}, "-NOAUTH Authentication required.\r\n"},
	})
	got := logs.String()
	if n := strings.Count(got, "the client sent no token (NOAUTH)"); n != 1 {
		t.Fatalf("NOAUTH logged %d times on one connection, want 1:\n%s", n, got)
	}
	for _, want := range []string{"TORCHINDUCTOR_REDIS_URL=redis://:TOKEN@host:port", "command=get", "namespace=default"} {
		if !strings.Contains(got, want) {
			t.Errorf("NOAUTH log lacks %q:\n%s", want, got)
		}
	}
	converse(t, e.dial(), []step{{[]string{"MGET", k}, "-NOAUTH Authentication required.\r\n"}})
	// redis-py 8, torch's client, opens each connection with HELLO 3.
	converse(t, e.dial(), []step{{[]string{"HELLO", "3"}, "-NOAUTH HELLO must be called with the client already authenticated, ..."}})
	converse(t, e.dial(), []step{{[]string{"AUTH", "not-a-token"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"}})
	got = logs.String()
	if n := strings.Count(got, "the client sent no token (NOAUTH)"); n != 3 || !strings.Contains(got, "command=hello") {
		t.Errorf("NOAUTH logged %d times on three connections (one HELLO), want 3:\n%s", n, got)
	}
	if !strings.Contains(got, "resp AUTH refused: unknown token") || !strings.Contains(got, "check the Redis password") {
		t.Errorf("WRONGPASS log says nothing actionable:\n%s", got)
	}
}
