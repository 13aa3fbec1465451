package resp_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/resp"
)

// TestLogsNameTheClient: every line the Redis listener logs about a client
// names its address under "client", the IP as the HTTP API's request lines
// name it, so one query finds a host's lines from both listeners (they said
// "remote", with the port).
func TestLogsNameTheClient(t *testing.T) {
	g, _ := guard(t, "")
	var logs lockedBuf
	e := start(t, options{auth: g, resp: func(c *resp.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.MaxConns = 1
	}})
	k := torchKey("client key")
	r := e.dial()
	converse(t, r, []step{
		{[]string{"GET", k}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"AUTH", "not-a-token"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
	})
	if got := e.dial().reply(); !strings.HasPrefix(got, "-ERR max number of clients reached") {
		t.Fatalf("a connection past MaxConns got %q", got)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		msg, _ := m["msg"].(string)
		for _, want := range []string{"resp command refused", "resp AUTH refused", "resp connection refused", "resp command"} {
			if !strings.HasPrefix(msg, want) {
				continue
			}
			seen[want] = true
			if m["client"] != "127.0.0.1" {
				t.Errorf("%q: client = %v, want 127.0.0.1: %s", want, m["client"], line)
			}
			if _, ok := m["remote"]; ok {
				t.Errorf("%q still names the client as remote: %s", want, line)
			}
			break
		}
	}
	for _, want := range []string{"resp command refused", "resp AUTH refused", "resp connection refused", "resp command"} {
		if !seen[want] {
			t.Errorf("no %q line logged:\n%s", want, logs.String())
		}
	}
}
