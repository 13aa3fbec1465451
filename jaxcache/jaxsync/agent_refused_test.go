package jaxsync_test

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/jaxcache"
	"github.com/cachesvc/cachesvc/jaxcache/jaxsync"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
)

// TestAgentStopsPollOnServerWideError: a token the server refuses, or a
// server that does not answer, fails every upload the same way, so a poll
// ends at the first such failure with one error that says what to do,
// instead of one warning (and one request) per file in the directory.
func TestAgentStopsPollOnServerWideError(t *testing.T) {
	tokens := authtest.WriteTokens(t, []authtest.Token{{Name: "trainer", Secret: "agent-test-secret-reader-0123456789", Scopes: "default:read"}}, "")
	g, err := auth.NewGuard(tokens, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := keyingtest.Keyer(t, plugins.Config{}, keying.Config{})
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Auth = g; c.Keyer = k }})
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String() // nothing listens there
	closed.Close()

	tests := []struct {
		name, url, token, want string
	}{
		{"read-only token", srv.URL, "agent-test-secret-reader-0123456789", `write scope on namespace "default"`},
		{"unknown token", srv.URL, "agent-test-secret-unknown-0123456789", `write scope on namespace "default"`},
		{"nothing listening", refused, "", "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, err := jaxcache.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				os.WriteFile(dir.CachePath(jaxKey(i)), jaxValue(1, "exe"), 0o644)
			}
			cl, err := client.New(client.Config{BaseURL: tt.url, Token: tt.token})
			if err != nil {
				t.Fatal(err)
			}
			a, err := jaxsync.NewAgent(jaxsync.AgentConfig{Client: cl, Namespace: "default", Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			poll(t, a) // first sighting: nothing is stable yet
			st, err := a.Poll(t.Context())
			if err == nil || !strings.Contains(err.Error(), tt.want) || st.Failed != 1 || st.Uploaded != 0 {
				t.Fatalf("poll: %+v, %v; want the first failure to end the poll with an error naming %q", st, err, tt.want)
			}
			// The files were not given up on: the next poll tries again.
			if _, err := a.Poll(t.Context()); err == nil {
				t.Fatal("second poll: no error")
			}
		})
	}
}
