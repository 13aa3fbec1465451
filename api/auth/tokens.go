// Package auth holds cachesvc's access control: the tokens file (names,
// SHA-256 hashes of bearer tokens, scopes per namespace), the reloadable
// Guard that answers "may this token do that here?", TLS configuration and
// Ed25519 entry signing.
//
// # Tokens file
//
// One rule per line; blank lines and lines starting with '#' are ignored:
//
//	# name        sha256 of the token (64 hex)                        namespace:scope,...
//	ci-writer     9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 default:write,team-a:read
//	alice         2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae *:admin
//	anonymous     -                                                  default:read
//
// Scopes are read < write < admin; each implies those below it. The namespace
// "*" grants the scope in every namespace and is the one that counts for
// operations that span namespaces (all namespaces' stats, plugin
// management). The reserved name "anonymous" with hash "-" grants read to
// requests without a token in the namespaces it lists; it may grant read
// only. Only hashes are stored: `cachesvc token new --name N` prints a fresh
// token and its line.
package auth

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/wire"
)

// Sentinel errors returned by Authorize. The api package maps them to 401
// and 403.
var (
	// ErrUnauthenticated means the request carried no token where one is
	// needed, or a token that matches no entry of the tokens file.
	ErrUnauthenticated = errors.New("missing or unknown bearer token")
	// ErrForbidden means the token is valid but lacks the scope the request
	// needs in its namespace.
	ErrForbidden = errors.New("token lacks the required scope")
)

// Scope is a level of access in a namespace. Higher scopes imply lower ones.
type Scope uint8

// Scopes in increasing order of power.
const (
	// ScopeNone grants nothing.
	ScopeNone Scope = iota
	// ScopeRead allows GET/HEAD of entries, keys, lookup, batch, exists,
	// manifests and the namespace's stats.
	ScopeRead
	// ScopeWrite adds PUT of entries and compile leases.
	ScopeWrite
	// ScopeAdmin adds DELETE of entries, plugin management and, on "*",
	// every namespace's stats.
	ScopeAdmin
)

// String returns the scope's name as written in the tokens file.
func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeWrite:
		return "write"
	case ScopeAdmin:
		return "admin"
	}
	return "none"
}

// ParseScope parses "read", "write" or "admin".
func ParseScope(s string) (Scope, error) {
	switch s {
	case "read":
		return ScopeRead, nil
	case "write":
		return ScopeWrite, nil
	case "admin":
		return ScopeAdmin, nil
	}
	return ScopeNone, fmt.Errorf("scope %q is unknown: use read, write or admin", s)
}

// AllNamespaces is the namespace pattern that matches every namespace.
const AllNamespaces = "*"

// AnonymousName is the reserved rule name for requests without a token.
const AnonymousName = "anonymous"

// Limits on the tokens file, so that a damaged or hostile file cannot make
// parsing expensive.
const (
	MaxFileBytes = 1 << 20
	MaxLineBytes = 8 << 10
	MaxRules     = 10000
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// Rule is one line of the tokens file: a named token hash and its scopes.
type Rule struct {
	// Name identifies the token in logs, metrics and entry provenance. It is
	// not secret.
	Name string
	// Hash is the SHA-256 of the token; zero for the anonymous rule.
	Hash [32]byte
	// Scopes maps a namespace, or "*", to the scope granted there.
	Scopes map[string]Scope
}

// Allows reports whether the rule grants need in namespace ns. For ns ==
// "*" only the rule's "*" scope counts.
func (r *Rule) Allows(ns string, need Scope) bool {
	return need != ScopeNone && r.scopeIn(ns) >= need
}

// scopeIn returns the highest scope r grants in namespace ns ("*": the
// scope granted on every namespace).
func (r *Rule) scopeIn(ns string) Scope {
	have := r.Scopes[AllNamespaces]
	if ns != AllNamespaces {
		have = max(have, r.Scopes[ns])
	}
	return have
}

// Tokens is a parsed tokens file. It is immutable and safe for concurrent
// use.
type Tokens struct {
	rules     []Rule
	anonymous *Rule
}

// Len returns the number of token rules, not counting the anonymous rule.
func (t *Tokens) Len() int { return len(t.rules) }

// Names returns the token names in file order.
func (t *Tokens) Names() []string {
	names := make([]string, len(t.rules))
	for i := range t.rules {
		names[i] = t.rules[i].Name
	}
	return names
}

// Identity is who a request was authorized as.
type Identity struct {
	// Name is the token's name, or "anonymous".
	Name string
	// Anonymous is true when the request carried no token.
	Anonymous bool
	// Writes is true when the rule that authorized the request grants
	// write scope (or more) in the namespace it was authorized for
	// (Authorize only): such a caller's lookups admit the namespace into
	// the statistics, as its PUT would.
	Writes bool
}

// Authenticate returns the rule whose hash matches secret. It hashes secret
// once and compares it against every rule in constant time, so the time
// taken does not depend on which rule, if any, matches.
func (t *Tokens) Authenticate(secret string) (*Rule, bool) {
	if secret == "" {
		return nil, false
	}
	h := sha256.Sum256([]byte(secret))
	match := -1
	for i := range t.rules {
		if subtle.ConstantTimeCompare(h[:], t.rules[i].Hash[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return nil, false
	}
	return &t.rules[match], true
}

// Authorize decides whether a request bearing secret ("" when it carried
// none) may act with scope need in namespace ns ("*" for operations across
// namespaces). It returns ErrUnauthenticated for a missing or unknown token
// (unless anonymous access covers the request) and ErrForbidden for a known
// token without the scope.
func (t *Tokens) Authorize(secret, ns string, need Scope) (Identity, error) {
	if secret == "" {
		if t.anonymous != nil && t.anonymous.Allows(ns, need) {
			return Identity{Name: AnonymousName, Anonymous: true, Writes: t.anonymous.scopeIn(ns) >= ScopeWrite}, nil
		}
		return Identity{}, ErrUnauthenticated
	}
	r, ok := t.Authenticate(secret)
	if !ok {
		return Identity{}, ErrUnauthenticated
	}
	id := Identity{Name: r.Name}
	if !r.Allows(ns, need) {
		return id, ErrForbidden
	}
	id.Writes = r.scopeIn(ns) >= ScopeWrite
	return id, nil
}

// Identify decides whether a request bearing secret ("" when it carried
// none) may call a route open to any known token: it returns the token's
// identity, the anonymous identity when the request has no token and the
// file grants anonymous access anywhere, and ErrUnauthenticated otherwise.
func (t *Tokens) Identify(secret string) (Identity, error) {
	if secret == "" {
		if t.anonymous != nil && len(t.anonymous.Scopes) > 0 {
			return Identity{Name: AnonymousName, Anonymous: true}, nil
		}
		return Identity{}, ErrUnauthenticated
	}
	r, ok := t.Authenticate(secret)
	if !ok {
		return Identity{}, ErrUnauthenticated
	}
	return Identity{Name: r.Name}, nil
}

// LineError is a problem at one line of a tokens file. Its message never
// contains a token.
type LineError struct {
	File string
	Line int
	Msg  string
}

// Error returns "file:line: message".
func (e *LineError) Error() string {
	return fmt.Sprintf("tokens file %s, line %d: %s", e.File, e.Line, e.Msg)
}

// LoadFile reads and parses the tokens file at path.
func LoadFile(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open tokens file: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse parses a tokens file read from r; name is used in error messages.
// Any malformed line fails the whole file with a *LineError.
func Parse(r io.Reader, name string) (*Tokens, error) {
	lr := &io.LimitedReader{R: r, N: MaxFileBytes + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes)
	t := &Tokens{}
	names := map[string]bool{}
	hashes := map[[32]byte]string{}
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		rule, err := parseRule(text)
		if err != nil {
			return nil, &LineError{File: name, Line: line, Msg: err.Error()}
		}
		if names[rule.Name] {
			return nil, &LineError{File: name, Line: line, Msg: fmt.Sprintf("name %q appears twice", rule.Name)}
		}
		names[rule.Name] = true
		if rule.Name == AnonymousName {
			t.anonymous = &rule
			continue
		}
		if other, dup := hashes[rule.Hash]; dup {
			return nil, &LineError{File: name, Line: line, Msg: fmt.Sprintf("token %q has the same hash as token %q", rule.Name, other)}
		}
		hashes[rule.Hash] = rule.Name
		if len(t.rules) >= MaxRules {
			return nil, &LineError{File: name, Line: line, Msg: fmt.Sprintf("more than %d tokens", MaxRules)}
		}
		t.rules = append(t.rules, rule)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &LineError{File: name, Line: line + 1, Msg: fmt.Sprintf("line longer than %d bytes", MaxLineBytes)}
		}
		return nil, fmt.Errorf("read tokens file %s: %w", name, err)
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("read tokens file %s: larger than %d bytes", name, MaxFileBytes)
	}
	return t, nil
}

// ValidateName checks a token rule's name (the writer recorded for the
// entries the token stores).
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("name %q is invalid: use 1 to 64 characters of A-Z, a-z, 0-9, '.', '_', '@' or '-', starting with a letter or digit", truncate(name))
	}
	return nil
}

func parseRule(text string) (Rule, error) {
	f := strings.Fields(text)
	// The usual slips when first writing the file: the output of `cachesvc
	// token new` pasted as it is, or the token itself. Say which, and
	// never echo a token.
	switch {
	case f[0] == "line:":
		return Rule{}, errors.New(`starts with "line:": keep only what follows it in the output of 'cachesvc token new' (name, sha256 of the token, namespace:scope list)`)
	case f[0] == "token:" || (len(f) != 3 && strings.HasPrefix(f[0], TokenPrefix)): // a rule may be named cachesvc_...
		return Rule{}, errors.New("holds a token: the tokens file takes the line 'cachesvc token new' prints after \"line:\" (name, sha256 of the token, namespace:scope list), never the token itself; give the token to clients")
	}
	if len(f) != 3 {
		return Rule{}, fmt.Errorf("want 3 fields (name, sha256 of the token, namespace:scope list), got %d", len(f))
	}
	r := Rule{Name: f[0]}
	if err := ValidateName(r.Name); err != nil {
		return Rule{}, err
	}
	if r.Name == AnonymousName {
		if f[1] != "-" {
			return Rule{}, errors.New(`the anonymous rule takes "-" instead of a hash`)
		}
	} else {
		if len(f[1]) != 64 || strings.ToLower(f[1]) != f[1] {
			return Rule{}, errors.New("field 2 must be the SHA-256 of the token as 64 lowercase hex characters (never the token itself)")
		}
		if _, err := hex.Decode(r.Hash[:], []byte(f[1])); err != nil {
			return Rule{}, errors.New("field 2 must be the SHA-256 of the token as 64 lowercase hex characters (never the token itself)")
		}
	}
	scopes, err := ParseScopes(f[2])
	if err != nil {
		return Rule{}, err
	}
	for _, s := range scopes {
		if r.Name == AnonymousName && s != ScopeRead {
			return Rule{}, fmt.Errorf("the anonymous rule may grant read only, not %s", s)
		}
	}
	r.Scopes = scopes
	return r, nil
}

// truncate cuts a name or scope for an error message to 40 runes and "…",
// never inside a rune (wire.CutRunes); the message quotes it with %q, which
// shows what is kept as it was sent: not wire.OneLine, whose joined white
// space would hide the tab or no-break space that made the name invalid.
func truncate(s string) string {
	return wire.CutRunes(s, 40)
}

// TokenPrefix starts every token made by NewToken, so that secret scanners
// and people can recognise one.
const TokenPrefix = wire.TokenPrefix

// NewToken returns a fresh random token (256 bits of entropy).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// HashToken returns the SHA-256 of token as stored in the tokens file.
func HashToken(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// FormatRule returns the tokens-file line for a token named name with the
// given scopes. It validates what it formats.
func FormatRule(name string, hash [32]byte, scopes map[string]Scope) (string, error) {
	if len(scopes) == 0 {
		return "", errors.New("format token rule: no scopes")
	}
	nss := make([]string, 0, len(scopes))
	for ns := range scopes {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	parts := make([]string, len(nss))
	for i, ns := range nss {
		parts[i] = ns + ":" + scopes[ns].String()
	}
	line := fmt.Sprintf("%s %s %s", name, hex.EncodeToString(hash[:]), strings.Join(parts, ","))
	if _, err := parseRule(line); err != nil {
		return "", fmt.Errorf("format token rule: %w", err)
	}
	return line, nil
}

// ParseScopes parses a scope list such as "default:write,team-a:read": each
// namespace (or "*") at most once.
func ParseScopes(list string) (map[string]Scope, error) {
	scopes := map[string]Scope{}
	for _, item := range strings.Split(list, ",") {
		ns, sc, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("scope %q must be namespace:scope, e.g. default:read", truncate(item))
		}
		if ns != AllNamespaces {
			if err := cachekey.ValidateNamespace(ns); err != nil {
				return nil, err
			}
		}
		s, err := ParseScope(sc)
		if err != nil {
			return nil, err
		}
		if _, dup := scopes[ns]; dup {
			return nil, fmt.Errorf("namespace %q is listed twice", ns)
		}
		scopes[ns] = s
	}
	return scopes, nil
}
