package auth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAuthorize(t *testing.T) {
	tk, err := LoadFile("testdata/tokens.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tk.Names(), ","); got != "ci-writer,alice,reader" {
		t.Fatalf("names = %s", got)
	}
	tests := []struct {
		secret, ns string
		need       Scope
		wantName   string
		wantErr    error
	}{
		{"secret-ci", "default", ScopeWrite, "ci-writer", nil},
		{"secret-ci", "default", ScopeRead, "ci-writer", nil},
		{"secret-ci", "default", ScopeAdmin, "ci-writer", ErrForbidden},
		{"secret-ci", "team-a", ScopeRead, "ci-writer", nil},
		{"secret-ci", "team-a", ScopeWrite, "ci-writer", ErrForbidden},
		{"secret-ci", "other", ScopeRead, "ci-writer", ErrForbidden},
		{"secret-ci", "*", ScopeRead, "ci-writer", ErrForbidden},
		{"secret-alice", "anything", ScopeAdmin, "alice", nil},
		{"secret-alice", "*", ScopeAdmin, "alice", nil},
		{"secret-reader", "x", ScopeRead, "reader", nil},
		{"secret-reader", "x", ScopeWrite, "reader", ErrForbidden},
		{"secret-reader", "*", ScopeRead, "reader", nil},
		{"wrong", "default", ScopeRead, "", ErrUnauthenticated},
		{"secret-ci ", "default", ScopeRead, "", ErrUnauthenticated},
		{"", "default", ScopeRead, "", ErrUnauthenticated},
		{"", "public", ScopeRead, "anonymous", nil},
		{"", "public", ScopeWrite, "", ErrUnauthenticated},
		{"", "*", ScopeRead, "", ErrUnauthenticated},
		{"secret-ci", "default", ScopeNone, "ci-writer", ErrForbidden},
	}
	for _, tc := range tests {
		id, err := tk.Authorize(tc.secret, tc.ns, tc.need)
		if !errors.Is(err, tc.wantErr) || id.Name != tc.wantName {
			t.Errorf("Authorize(%q, %q, %s) = %+v, %v; want name %q, err %v", tc.secret, tc.ns, tc.need, id, err, tc.wantName, tc.wantErr)
		}
		if tc.wantName == "anonymous" && !id.Anonymous {
			t.Errorf("anonymous identity not marked anonymous")
		}
	}
}

// TestAuthorizeWrites: Identity.Writes says whether the token may write in
// the namespace, whatever the scope the request needed, so that a writer's
// lookups admit their namespace into the statistics and a reader's do not.
func TestAuthorizeWrites(t *testing.T) {
	tk, err := LoadFile("testdata/tokens.txt")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		secret, ns string
		need       Scope
		want       bool
	}{
		{"secret-ci", "default", ScopeRead, true},
		{"secret-ci", "default", ScopeWrite, true},
		{"secret-ci", "team-a", ScopeRead, false},
		{"secret-alice", "anything", ScopeRead, true},
		{"secret-reader", "x", ScopeRead, false},
		{"", "public", ScopeRead, false},
	}
	for _, tc := range tests {
		id, err := tk.Authorize(tc.secret, tc.ns, tc.need)
		if err != nil || id.Writes != tc.want {
			t.Errorf("Authorize(%q, %q, %s) = %+v, %v; want Writes %v", tc.secret, tc.ns, tc.need, id, err, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	h := strings.Repeat("ab", 32)
	tests := []struct {
		name, file string
		line       int
		msg        string
	}{
		{"two fields", "a " + h, 1, "want 3 fields"},
		{"bad name", "-x " + h + " default:read", 1, "name"},
		{"raw token", "# c\n\nci cachesvc_abcdef default:read", 3, "never the token itself"},
		// The whole output of `cachesvc token new` pasted, or the token alone.
		{"token alone", "cachesvc_abcdef", 1, "holds a token: the tokens file takes the line 'cachesvc token new' prints"},
		{"token: line", "token: cachesvc_abcdef", 1, "holds a token"},
		{"line: prefix", "line: ci " + h + " default:read", 1, `starts with "line:": keep only what follows it`},
		{"rule named like a token", "cachesvc_ci " + h + " default:owner", 1, `scope "owner" is unknown`},
		{"upper hex", "ci " + strings.ToUpper(h) + " default:read", 1, "64 lowercase hex"},
		{"bad hex", "ci " + strings.Repeat("zz", 32) + " default:read", 1, "64 lowercase hex"},
		{"no colon", "ci " + h + " default", 1, "namespace:scope"},
		{"bad ns", "ci " + h + " Default:read", 1, "namespace"},
		{"bad scope", "ci " + h + " default:owner", 1, "scope \"owner\" is unknown"},
		{"dup ns", "ci " + h + " default:read,default:write", 1, "listed twice"},
		{"dup name", "ci " + h + " default:read\nci " + strings.Repeat("cd", 32) + " x:read", 2, "appears twice"},
		{"dup hash", "ci " + h + " default:read\nci2 " + h + " x:read", 2, "same hash"},
		{"anon hash", "anonymous " + h + " default:read", 1, `"-"`},
		{"anon write", "anonymous - default:write", 1, "read only"},
		{"dash hash", "ci - default:read", 1, "64 lowercase hex"},
		{"long line", "ci " + h + " " + strings.Repeat("a:read,", MaxLineBytes/7+1), 1, "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.file), "t.txt")
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want *LineError", err)
			}
			if le.Line != tc.line || le.File != "t.txt" || !strings.Contains(le.Msg, tc.msg) {
				t.Fatalf("err = %v, want line %d containing %q", err, tc.line, tc.msg)
			}
			if strings.Contains(err.Error(), "cachesvc_abcdef") {
				t.Fatalf("error echoes the token: %v", err)
			}
		})
	}
}

func TestParseTooLarge(t *testing.T) {
	big := strings.Repeat("# padding padding padding padding padding padding\n", MaxFileBytes/50+10)
	if _, err := Parse(strings.NewReader(big), "big"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v", err)
	}
}

func TestNewTokenAndFormatRule(t *testing.T) {
	tok, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+43 {
		t.Fatalf("token %q", tok)
	}
	scopes, err := ParseScopes("default:write,*:read")
	if err != nil {
		t.Fatal(err)
	}
	line, err := FormatRule("ci", HashToken(tok), scopes)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(line, tok) {
		t.Fatal("rule contains the token")
	}
	tk, err := Parse(strings.NewReader(line), "gen")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := tk.Authorize(tok, "default", ScopeWrite); err != nil || id.Name != "ci" {
		t.Fatalf("generated token: %+v %v", id, err)
	}
	if _, err := FormatRule("bad name", HashToken(tok), scopes); err == nil {
		t.Fatal("FormatRule accepted a bad name")
	}
	if _, err := ParseScopes("default:root"); err == nil {
		t.Fatal("ParseScopes accepted a bad scope")
	}
}

func TestGuardReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	write := func(s string) {
		t.Helper()
		// Write then rename, as an operator's tooling should.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	a := HashToken("tok-a")
	b := HashToken("tok-b")
	ruleA, _ := FormatRule("a", a, map[string]Scope{"default": ScopeRead})
	ruleB, _ := FormatRule("b", b, map[string]Scope{"default": ScopeRead})
	write(ruleA + "\n")
	g, err := NewGuard(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	sig := make(chan os.Signal)
	done := make(chan error)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.ReloadOn(ctx, sig, done)

	write(ruleB + "\n")
	sig <- os.Interrupt
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := g.Authorize("tok-a", "default", ScopeRead); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("old token after reload: %v", err)
	}
	if _, err := g.Authorize("tok-b", "default", ScopeRead); err != nil {
		t.Fatalf("new token after reload: %v", err)
	}

	// A bad file keeps the tokens in force.
	write(ruleA + "\nbroken line\n")
	sig <- os.Interrupt
	err = <-done
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 {
		t.Fatalf("bad reload err = %v", err)
	}
	if _, err := g.Authorize("tok-b", "default", ScopeRead); err != nil {
		t.Fatalf("tokens lost after bad reload: %v", err)
	}
	// So does a missing file.
	os.Remove(path)
	sig <- os.Interrupt
	if err := <-done; err == nil {
		t.Fatal("reload of a missing file succeeded")
	}
	if _, err := g.Authorize("tok-b", "default", ScopeRead); err != nil {
		t.Fatalf("tokens lost after failed reload: %v", err)
	}
}

func TestNewGuardCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(path, []byte("# ok\nci "+strings.Repeat("ab", 32)+" default:read\nci2 zz default:read\n"), 0o600)
	_, err := NewGuard(path, nil)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v, want the file and line 3", err)
	}
}

func BenchmarkAuthorize(b *testing.B) {
	tk, err := LoadFile("testdata/tokens.txt")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		tk.Authorize("secret-reader", "default", ScopeRead)
	}
}

// TestLongNamesAreCutByRunes: a name or scope quoted in an error is cut to
// 40 characters, never inside one (a cut by bytes split "é" and the
// message showed a stray \xc3), and what is kept is quoted as it was sent,
// invisible characters escaped, so that the one that makes it invalid
// shows.
func TestLongNamesAreCutByRunes(t *testing.T) {
	a39 := strings.Repeat("a", 39)
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"name cut after a two-byte rune", func() error { return ValidateName(a39 + "éééé") }, `name "` + a39 + `é…" is invalid`},
		{"name short enough", func() error { return ValidateName("ci bot") }, `name "ci bot" is invalid`},
		{"name with a no-break space", func() error { return ValidateName("ci\u00a0bot") }, `name "ci\u00a0bot" is invalid`},
		{"scope cut after a three-byte rune", func() error { _, err := ParseScopes(a39 + "€€€"); return err }, `scope "` + a39 + `€…" must be namespace:scope`},
		{"invalid bytes stay escaped", func() error { return ValidateName("a\xffb") }, `name "a\xffb" is invalid`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %s", err, tc.want)
			}
		})
	}
}
