package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestStatsCommand runs `cachesvc stats` in-process against a real server
// seeded with 1,000 lookups (750 hits) and checks the tables.
func TestStatsCommand(t *testing.T) {
	srv := statstest.Start(t, nil)
	statstest.Seed(t, srv.URL)
	tests := []struct {
		name string
		args []string
		code int
		out  []string
		err  string
	}{
		{"all namespaces", []string{"stats", "--server", srv.URL}, 0,
			[]string{"all namespaces", "Lookups     1,000  (hits 750, misses 250)", "Hit rate    75.0%", "(2,437.5 s)", "team-a", "team-b", "sweep-1", "100.0%", "sweep-2", "50.0%", "jit_step_team-b_0"}, ""},
		{"one namespace", []string{"stats", "--server", srv.URL + "/", "--ns", "team-b"}, 0,
			[]string{"namespace team-b", "Lookups     500  (hits 375, misses 125)", "(1,500 s)"}, ""},
		{"one namespace, new flag names", []string{"stats", "--url", srv.URL, "--namespace", "team-b"}, 0,
			[]string{"namespace team-b", "Lookups     500  (hits 375, misses 125)"}, ""},
		// Usage errors (exit 2) naming the flag, as warm, agent and admin
		// answer them; stats sent them to the server (exit 1, the namespace
		// shown URL-escaped as "Bad%20NS") or failed with "server ...".
		{"bad namespace", []string{"stats", "--server", srv.URL, "--ns", "Bad NS"}, 2, nil, `--namespace: namespace "Bad NS" is invalid`},
		{"not a url", []string{"stats", "--server", "cache:8080"}, 2, nil, `--url: server URL "cache:8080" is not an http(s) URL`},
		{"empty url", []string{"stats", "--url", ""}, 2, nil, "--url is empty: give the server's URL"},
		{"extra argument", []string{"stats", "--server", srv.URL, "extra"}, 2, nil, "unexpected arguments"},
		{"scope replica", []string{"stats", "--url", srv.URL, "--scope", "replica"}, 0, []string{"Lookups     1,000"}, ""},
		{"bad scope", []string{"stats", "--url", srv.URL, "--scope", "world"}, 2, nil, `--scope "world": use replica or fleet`},
		{"fleet scope is all namespaces", []string{"stats", "--url", srv.URL, "--scope", "fleet", "--namespace", "team-a"}, 2, nil, "--scope fleet covers all namespaces"},
		{"fleet scope of a lone server", []string{"stats", "--url", srv.URL, "--scope", "fleet"}, 1, nil, "not part of a fleet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			if strings.Contains(tt.name, "one namespace") && (strings.Contains(stdout.String(), "\nServer      ") || !strings.Contains(stdout.String(), "\nStore       ")) {
				t.Errorf("a namespace's report has a whole-server line, or no store line:\n%s", stdout.String())
			}
			for _, want := range tt.out {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, stdout.String())
				}
			}
			if tt.err != "" && !strings.Contains(stderr.String(), tt.err) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.err)
			}
		})
	}
}

// TestStatsJSON: `cachesvc stats --json` prints the numbers the tables are
// made of, equal to GET /v1/stats (and /v1/{ns}/stats with --namespace),
// for scripts.
func TestStatsJSON(t *testing.T) {
	srv := statstest.Start(t, nil)
	statstest.Seed(t, srv.URL)
	for _, tt := range []struct {
		args []string
		path string
	}{
		{[]string{"stats", "--url", srv.URL, "--json"}, "/v1/stats"},
		{[]string{"stats", "--url", srv.URL, "--namespace", "team-b", "--json"}, "/v1/team-b/stats"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit %d; stderr: %s", tt.args, code, stderr.String())
		}
		var got wire.StatsResponse
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", tt.args, err, stdout.String())
		}
		resp, err := http.Get(srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		var want wire.StatsResponse
		err = json.NewDecoder(resp.Body).Decode(&want)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got.Totals != want.Totals || got.Totals.Lookups == 0 || len(got.Namespaces) != len(want.Namespaces) || len(got.Runs) != len(want.Runs) {
			t.Errorf("%v: totals %+v (%d namespaces, %d runs); %s says %+v (%d, %d)", tt.args, got.Totals, len(got.Namespaces), len(got.Runs),
				tt.path, want.Totals, len(want.Namespaces), len(want.Runs))
		}
	}
}

// TestStatsEnv: the client commands read CACHESVC_URL and
// CACHESVC_NAMESPACE, and the old names CACHESVC_SERVER and CACHESVC_NS
// when the new ones are unset, with a note on stderr.
func TestStatsEnv(t *testing.T) {
	srv := statstest.Start(t, nil)
	statstest.Seed(t, srv.URL)
	tests := []struct {
		name     string
		env      map[string]string
		want     string
		wantNote string
	}{
		{"new names", map[string]string{"CACHESVC_URL": srv.URL, "CACHESVC_NAMESPACE": "team-a"}, "namespace team-a", ""},
		{"old names", map[string]string{"CACHESVC_SERVER": srv.URL, "CACHESVC_NS": "team-b"}, "namespace team-b", "CACHESVC_NS is an old name of CACHESVC_NAMESPACE"},
		{"new name wins", map[string]string{"CACHESVC_URL": srv.URL, "CACHESVC_SERVER": "http://127.0.0.1:1", "CACHESVC_NAMESPACE": "team-a", "CACHESVC_NS": "team-b"}, "namespace team-a", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"CACHESVC_URL", "CACHESVC_SERVER", "CACHESVC_NAMESPACE", "CACHESVC_NS"} {
				t.Setenv(k, tt.env[k])
			}
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{"stats"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, stdout.String())
			}
			if tt.wantNote == "" && stderr.Len() > 0 || !strings.Contains(stderr.String(), tt.wantNote) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.wantNote)
			}
		})
	}
}

// TestStatsReadToken: stats shows every namespace unless given one, which
// needs admin on "*"; a team's read token is refused with a hint to name
// its namespace, and with --namespace it is not.
func TestStatsReadToken(t *testing.T) {
	srv := adminServer(t, nil) // viewer reads team
	code, _, errOut := runCmd(t, "stats", "--url", srv.URL, "--token", viewerSecret)
	want := `(stats of every namespace need admin on "*": give --namespace NS for a namespace the token reads)`
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("stats of every namespace with a read token: exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
	}
	code, _, errOut = runCmd(t, "stats", "--url", srv.URL, "--token", viewerSecret, "--namespace", "other")
	if code != 1 || !strings.Contains(errOut, `lacks read scope in namespace "other"`) || strings.Contains(errOut, "give --namespace") {
		t.Errorf("stats of a namespace the token does not read: exit %d, stderr %q; want the server's 403 alone", code, errOut)
	}
}

// TestClientCommandsUnauthorized: a 401 to stats, warm or agent says how to
// give the CLI a token (it said only the server's "send Authorization:
// Bearer <token>", which a CLI user cannot do), whether none was given or
// the server does not know it; admin keeps its own hint.
func TestClientCommandsUnauthorized(t *testing.T) {
	srv := adminServer(t, nil)
	dir := t.TempDir()
	const hint = "(the server wants a token its --tokens file lists: give --token-file FILE or CACHESVC_TOKEN_FILE (or --token, CACHESVC_TOKEN); 'cachesvc token new' makes one)"
	commands := map[string][]string{
		"stats":           {"stats", "--url", srv.URL},
		"stats namespace": {"stats", "--url", srv.URL, "--namespace", "team"},
		"warm":            {"warm", "--url", srv.URL, "--namespace", "team", "--run", "r1", "--jax-cache-dir", filepath.Join(dir, "jax1")},
		"agent":           {"agent", "--url", srv.URL, "--namespace", "team", "--warm-run", "r1", "--once", "--jax-cache-dir", filepath.Join(dir, "jax2")},
	}
	for name, args := range commands {
		for _, token := range []string{"", "not-a-known-token-0123456789"} {
			t.Run(fmt.Sprintf("%s token=%q", name, token), func(t *testing.T) {
				if token != "" {
					args = append(args[:len(args):len(args)], "--token", token)
				}
				code, _, errOut := runCmd(t, args...)
				if code != 1 || !strings.Contains(errOut, hint) {
					t.Errorf("%q: exit %d, stderr %q; want exit 1 and %q", args, code, errOut, hint)
				}
				if strings.Count(errOut, "--tokens file lists") > 1 {
					t.Errorf("%q: the hint is repeated: %q", args, errOut)
				}
			})
		}
	}
}
