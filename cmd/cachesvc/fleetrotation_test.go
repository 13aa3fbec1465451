package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/auth"
)

// TestFleetWarnsOfAMissedRotation: two replicas on one bucket, one of them
// left behind by a token rotation (its tokens file lacks the new token) and
// signing with another key. `stats --scope fleet` names both settings with
// each replica's value; once the lagging replica has the new file and its
// SIGHUP, the tokens warning goes while the signing key's stays (a key is
// read only at start). Before, replicas published neither, so a rotation
// one replica missed showed nowhere: behind a load balancer a client saw
// 401 on one request in N, and a half-rolled signing key bad_signature.
func TestFleetWarnsOfAMissedRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	dir := t.TempDir()
	ops, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	line := func(name, token, scopes string) string {
		sc, err := auth.ParseScopes(scopes)
		if err != nil {
			t.Fatal(err)
		}
		l, err := auth.FormatRule(name, auth.HashToken(token), sc)
		if err != nil {
			t.Fatal(err)
		}
		return l + "\n"
	}
	oldFile := line("ops", ops, "*:admin") + line("ci", "old-ci-token", "default:write")
	newFile := line("ops", ops, "*:admin") + line("ci-2", "new-ci-token", "default:write")
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokensA, tokensB := write("tokens-a", newFile), write("tokens-b", oldFile)
	var keys [2]string
	for i := range keys {
		keys[i] = filepath.Join(dir, "sign"+string(rune('1'+i))+".key")
		var so, se bytes.Buffer
		if code := run(context.Background(), []string{"signkey", "new", "--out", keys[i]}, nil, &so, &se); code != 0 {
			t.Fatalf("signkey new: exit %d: %s", code, se.String())
		}
	}

	f := newFleet(t)
	a := f.replica(t, "--replica-id", "replica-a", "--tokens", tokensA, "--signing-key", keys[0])
	b := f.replica(t, "--replica-id", "replica-b", "--tokens", tokensB, "--signing-key", keys[1])

	// stats waits for the configs to ride the heartbeats (after the
	// plugins load, every 10 s) until cond holds of the output.
	stats := func(what string, cond func(out string) bool) string {
		t.Helper()
		var out string
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{"stats", "--url", a.url, "--scope", "fleet", "--token", ops}, nil, &stdout, &stderr); code != 0 {
				t.Fatalf("stats --scope fleet: exit %d: %s", code, stderr.String())
			}
			out = stdout.String()
			if cond(out) {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("stats --scope fleet never showed %s:\n%s", what, out)
			}
		}
	}
	tokensWarning, keyWarning := "WARNING     replicas disagree on tokens", "WARNING     replicas disagree on signing_key"
	out := stats("both warnings", func(out string) bool {
		return strings.Contains(out, tokensWarning) && strings.Contains(out, keyWarning)
	})
	for _, w := range []string{": replica-a\n", ": replica-b\n"} {
		if strings.Count(out, w) != 2 {
			t.Errorf("output names %q %d times, want twice (a value per setting):\n%s", w, strings.Count(out, w), out)
		}
	}
	checkConfigInfo(t, a, b, ops, map[string]bool{"tokens": true, "signing_key": true})

	write("tokens-b", newFile)
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	stats("the tokens warning gone after the SIGHUP", func(out string) bool {
		return !strings.Contains(out, tokensWarning) && strings.Contains(out, keyWarning)
	})
	checkConfigInfo(t, a, b, ops, map[string]bool{"signing_key": true})
}

// configInfo returns the settings p exports in cachesvc_fleet_config_info,
// scraped with token.
func configInfo(t *testing.T, p *proc, token string) map[string]string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	got := map[string]string{}
	for _, m := range configInfoLine.FindAllStringSubmatch(string(body), -1) {
		got[m[1]] = m[2]
	}
	return got
}

// configInfoLine matches a cachesvc_fleet_config_info sample.
var configInfoLine = regexp.MustCompile(`(?m)^cachesvc_fleet_config_info\{setting="([a-z_]+)",value="([^"]*)"\} 1$`)

// checkConfigInfo checks that replicas a and b export every setting in
// cachesvc_fleet_config_info, with different values for those in differ
// and one value for the rest: what an alert comparing the replicas of a
// job reads. The fleet view (stats) agrees already, so the configs in
// force are the ones compared.
func checkConfigInfo(t *testing.T, a, b *proc, token string, differ map[string]bool) {
	t.Helper()
	ca, cb := configInfo(t, a, token), configInfo(t, b, token)
	for _, setting := range []string{"max_entry_size", "plugins", "namespaces", "tokens", "signing_key"} {
		va, vb := ca[setting], cb[setting]
		switch {
		case va == "" || vb == "":
			t.Errorf("cachesvc_fleet_config_info{setting=%q}: replica-a %q, replica-b %q, want a value from each", setting, va, vb)
		case differ[setting] && va == vb:
			t.Errorf("cachesvc_fleet_config_info{setting=%q} is %q on both replicas, want them apart (they disagree)", setting, va)
		case !differ[setting] && va != vb:
			t.Errorf("cachesvc_fleet_config_info{setting=%q}: replica-a %q, replica-b %q, want one value (they agree)", setting, va, vb)
		}
	}
}
