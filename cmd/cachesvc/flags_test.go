package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0", 0, false},
		{"4096", 4096, false},
		{"4096B", 4096, false},
		{"10GiB", 10 << 30, false},
		{"10gib", 10 << 30, false},
		{"512MB", 512e6, false},
		{"512MiB", 512 << 20, false},
		{"1.5G", 3 << 29, false},
		{"2TB", 2e12, false},
		{"1KiB", 1024, false},
		{"1kb", 1000, false},
		{" 3 MiB ", 3 << 20, false},
		{"", 0, true},
		{"GiB", 0, true},
		{"10XB", 0, true},
		{"1.2.3G", 0, true},
		{"-5", 0, true},
		{"99999999TiB", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseSize(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseSize(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("parseSize(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

// TestSizeUnitErrorListsWhatIsAccepted: the unknown-unit error names
// every unit parseSize accepts (the bare K, M, G, T too), and only those,
// so that a user can pick from it.
func TestSizeUnitErrorListsWhatIsAccepted(t *testing.T) {
	_, err := parseSize("12QB")
	if err == nil {
		t.Fatal("parseSize(12QB) accepted")
	}
	_, list, ok := strings.Cut(err.Error(), ": use ")
	if !ok {
		t.Fatalf("error %q names no units", err)
	}
	named := map[string]bool{}
	for _, u := range regexp.MustCompile(`\b[A-Za-z]+\b`).FindAllString(list, -1) {
		if u == "or" || u == "decimal" || u == "binary" || u == "none" {
			continue
		}
		named[strings.ToLower(u)] = true
		if _, err := parseSize("3" + u); err != nil {
			t.Errorf("the error names %s, which parseSize refuses: %v", u, err)
		}
	}
	for u := range sizeUnits {
		if u != "" && !named[u] {
			t.Errorf("parseSize accepts %q, which the error %q does not name", u, err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1000: "1000", 1024: "1KiB", 4 << 30: "4GiB", 3 << 20: "3MiB"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{
		"addr":           "CACHESVC_ADDR",
		"max-entry-size": "CACHESVC_MAX_ENTRY_SIZE",
		"log-format":     "CACHESVC_LOG_FORMAT",
	} {
		if got := envName(in); got != want {
			t.Errorf("envName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseFlagsEnv(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantAddr  string
		wantSize  int64
		wantUsage bool
	}{
		{"defaults", nil, nil, "127.0.0.1:8080", 1 << 20, false},
		{"env", map[string]string{"CACHESVC_ADDR": ":9", "CACHESVC_MAX_ENTRY_SIZE": "2GiB"}, nil, ":9", 2 << 30, false},
		{"flag beats env", map[string]string{"CACHESVC_ADDR": ":9"}, []string{"--addr", ":10", "--max-entry-size=5MB"}, ":10", 5e6, false},
		{"bad env", map[string]string{"CACHESVC_MAX_ENTRY_SIZE": "lots"}, nil, "", 0, true},
		{"bad flag", nil, []string{"--max-entry-size", "12QB"}, "", 0, true},
		{"unknown flag", nil, []string{"--nope"}, "", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			sio := stdio{Stderr: &stderr, Getenv: func(k string) string { return tc.env[k] }}
			fs := newFlagSet("test", "Test.", sio)
			addr := fs.String("addr", "127.0.0.1:8080", "address")
			var size int64
			sizeVar(fs, &size, "max-entry-size", 1<<20, "size")
			err := parseFlags(fs, tc.args, sio)
			var ue *usageError
			if tc.wantUsage {
				if !errors.As(err, &ue) {
					t.Fatalf("err = %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *addr != tc.wantAddr || size != tc.wantSize {
				t.Errorf("addr %q size %d, want %q %d", *addr, size, tc.wantAddr, tc.wantSize)
			}
		})
	}
}

func TestHelpListsEnv(t *testing.T) {
	var stdout, stderr bytes.Buffer
	sio := stdio{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	fs := newFlagSet("test", "Test.", sio)
	var size int64
	sizeVar(fs, &size, "max-size", 0, "limit")
	if err := parseFlags(fs, []string{"--help"}, sio); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	if !bytes.Contains(stdout.Bytes(), []byte("CACHESVC_MAX_SIZE")) || stderr.Len() > 0 {
		t.Errorf("help (on stdout) does not name the environment variable:\n%s\nstderr: %s", stdout.String(), stderr.String())
	}
}

// TestFlagAliases: an alias sets its target from the command line, its
// environment variable is read only when the target's is unset (with a note
// on stderr naming the new variable), and the target's wins.
func TestFlagAliases(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		want     string
		wantNote bool
	}{
		{"default", nil, nil, defaultURL, false},
		{"new env", map[string]string{"CACHESVC_URL": "http://a:1"}, nil, "http://a:1", false},
		{"old env only", map[string]string{"CACHESVC_SERVER": "http://b:2"}, nil, "http://b:2", true},
		{"new env wins", map[string]string{"CACHESVC_URL": "http://a:1", "CACHESVC_SERVER": "http://b:2"}, nil, "http://a:1", false},
		{"alias flag", map[string]string{"CACHESVC_URL": "http://a:1"}, []string{"--server", "http://c:3"}, "http://c:3", false},
		{"flag", nil, []string{"--url=http://d:4"}, "http://d:4", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			sio := stdio{Stderr: &stderr, Getenv: func(k string) string { return tc.env[k] }}
			fs := newFlagSet("test", "Test.", sio)
			var cf clientFlags
			cf.register(fs, "default", "namespace")
			if err := parseFlags(fs, tc.args, sio); err != nil {
				t.Fatal(err)
			}
			if cf.Server != tc.want {
				t.Errorf("url %q, want %q", cf.Server, tc.want)
			}
			note := "cachesvc: CACHESVC_SERVER is an old name of CACHESVC_URL; set CACHESVC_URL instead\n"
			if got := stderr.String(); (got == note) != tc.wantNote || (!tc.wantNote && got != "") {
				t.Errorf("stderr %q, want note %v", got, tc.wantNote)
			}
		})
	}
}

// TestFlagValueErrorsSayWhatToDo: a bad value of a built-in flag type, from
// the command line or the environment, says what the flag takes instead of
// the flag package's bare "parse error".
func TestFlagValueErrorsSayWhatToDo(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"duration flag", nil, []string{"--every", "abc"}, `invalid value "abc" for --every: not understood: use a duration such as 90s, 5m or 1h30m`},
		{"duration env", map[string]string{"CACHESVC_EVERY": "abc"}, nil, `invalid value "abc" for CACHESVC_EVERY: not understood: use a duration such as 90s, 5m or 1h30m`},
		{"bool flag", nil, []string{"--sync=maybe"}, `invalid boolean value "maybe" for --sync: not understood: use true or false`},
		{"bool env", map[string]string{"CACHESVC_SYNC": "maybe"}, nil, `invalid value "maybe" for CACHESVC_SYNC: not understood: use true or false`},
		{"int flag", nil, []string{"--count", "x"}, `invalid value "x" for --count: not understood: use an integer`},
		{"int out of range", nil, []string{"--count", "99999999999999999999"}, `invalid value "99999999999999999999" for --count: out of range: use an integer that fits`},
		{"command-line-only int", nil, []string{"--limit", "x"}, `invalid value "x" for --limit: not understood: use an integer`},
		{"size keeps its own sentence", nil, []string{"--size", "12QB"}, `invalid value "12QB" for --size: size "12QB" has unknown unit "QB": use B (or none), decimal KB, MB, GB, TB, or binary KiB, MiB, GiB, TiB (or K, M, G, T)`},
		{"bounded duration below its least", nil, []string{"--wait", "-1s"}, `invalid value "-1s" for --wait: want 0 (no limit) or more, e.g. 30s`},
		{"bounded duration env below its least", map[string]string{"CACHESVC_WAIT": "-1s"}, nil, `invalid value "-1s" for CACHESVC_WAIT: want 0 (no limit) or more, e.g. 30s`},
		{"bounded duration not a duration", nil, []string{"--wait", "soon"}, `invalid value "soon" for --wait: not understood: use a duration such as 90s, 5m or 1h30m`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sio := stdio{Stderr: io.Discard, Getenv: func(k string) string { return tc.env[k] }}
			fs := newFlagSet("test", "Test.", sio)
			fs.Duration("every", time.Minute, "interval")
			fs.Bool("sync", false, "sync")
			fs.Int("count", 1, "count")
			fs.Int("limit", 1, "limit")
			commandLineOnly(fs, "limit")
			var size int64
			sizeVar(fs, &size, "size", 0, "size")
			var wait time.Duration
			durationVar(fs, &wait, "wait", time.Minute, 0, noLimitOrMore, "wait")
			err := parseFlags(fs, tc.args, sio)
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a usage error", err)
			}
			if ue.msg != tc.want {
				t.Errorf("message\n got %s\nwant %s", ue.msg, tc.want)
			}
		})
	}
}
