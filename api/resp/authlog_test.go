package resp_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/resp"
)

// TestWrongPassLoggedOncePerConnection: a client guessing tokens pipelines
// AUTH after AUTH. Each refusal logged an INFO line, so one connection
// wrote 20,000 lines (7.6 MB) in 0.13 s, a disk filled as fast as the
// client could send. Now the first refusal on a connection is logged (as
// NOAUTH is), every one is still counted in cachesvc_resp_commands_total
// (result wrongpass), and a new connection logs its first again.
func TestWrongPassLoggedOncePerConnection(t *testing.T) {
	g, _ := guard(t, "")
	var logs lockedBuf
	e := start(t, options{auth: g, resp: func(c *resp.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	const wrongpass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	for _, tc := range []struct {
		name    string
		guesses int
		lines   int // "resp AUTH refused" lines logged in all, after this connection
	}{
		{"first connection", 50, 1},
		{"second connection", 50, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.dial()
			for i := range tc.guesses {
				if got := r.do("AUTH", "guess-"+strings.Repeat("x", i%7)); got != wrongpass {
					t.Fatalf("AUTH guess %d: %q, want WRONGPASS", i, got)
				}
			}
			if got := strings.Count(logs.String(), "resp AUTH refused"); got != tc.lines {
				t.Errorf("%d \"resp AUTH refused\" lines logged, want %d:\n%s", got, tc.lines, logs.String())
			}
		})
	}
	if got := e.metric(`cachesvc_resp_commands_total{command="auth",result="wrongpass"}`); got != 100 {
		t.Errorf("wrongpass counted %v times, want 100", got)
	}
}
