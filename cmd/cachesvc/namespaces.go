package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store"
)

// The namespaces file (serve --namespaces) sets per-namespace quotas and
// expiry of the hot store:
//
//	{
//	  "namespaces": {
//	    "team-a": {"max_bytes": "50GB", "max_entries": 100000, "max_idle": "168h", "max_age": "30d"},
//	    "ci":     {"max_bytes": "10GiB"}
//	  },
//	  "default": {"max_bytes": "5GB", "max_idle": "720h"}
//	}
//
// Every field is optional; an absent or zero bound is no bound. A listed
// namespace gets exactly its own block; "default" applies to every
// namespace not listed. max_bytes takes the units of --max-size (a string
// such as "50GB" or "10GiB", or a JSON integer of bytes); max_entries is a
// JSON integer; max_idle and max_age are durations ("90m", "168h", or whole
// or fractional days such as "30d"). The parser is strict: unknown or
// repeated fields, invalid namespace names and malformed values are errors
// that name the file and the line.

// maxNamespacesFile bounds the namespaces file read into memory.
const maxNamespacesFile = 4 << 20

// loadNamespaces reads and parses the namespaces file at path.
func loadNamespaces(path string) (store.Quotas, error) {
	f, err := os.Open(path)
	if err != nil {
		return store.Quotas{}, fmt.Errorf("read namespaces file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxNamespacesFile+1))
	if err != nil {
		return store.Quotas{}, fmt.Errorf("read namespaces file %s: %w", path, err)
	}
	if len(data) > maxNamespacesFile {
		return store.Quotas{}, fmt.Errorf("namespaces file %s is over %d bytes", path, maxNamespacesFile)
	}
	return parseNamespaces(path, data)
}

// nsParser walks the file's JSON tokens, so that every error has a line.
type nsParser struct {
	file string
	data []byte
	dec  *json.Decoder
}

// parseNamespaces parses the namespaces file's contents; file names it in
// errors.
func parseNamespaces(file string, data []byte) (store.Quotas, error) {
	p := &nsParser{file: file, data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.UseNumber()
	q := store.Quotas{Namespaces: map[string]store.Quota{}}
	err := p.object("the top level", func(key string, line int) error {
		switch key {
		case "namespaces":
			return p.object(`"namespaces"`, func(ns string, line int) error {
				if err := cachekey.ValidateNamespace(ns); err != nil {
					return p.errorf(line, "%s", err) // it names the namespace
				}
				nq, err := p.quota(fmt.Sprintf("namespace %q", ns))
				q.Namespaces[ns] = nq
				return err
			})
		case "default":
			var err error
			q.Default, err = p.quota(`"default"`)
			return err
		}
		return p.errorf(line, "unknown field %q at the top level: use namespaces or default", key)
	})
	if err != nil {
		return store.Quotas{}, err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		return store.Quotas{}, p.errorf(p.line(p.dec.InputOffset()), "unexpected data after the top-level object")
	}
	return q, nil
}

// line returns the 1-based line of byte offset off.
func (p *nsParser) line(off int64) int {
	off = min(max(off, 0), int64(len(p.data)))
	return 1 + bytes.Count(p.data[:off], []byte("\n"))
}

func (p *nsParser) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("namespaces file %s:%d: %s", p.file, line, fmt.Sprintf(format, args...))
}

// syntax turns a decoder error into one with a line.
func (p *nsParser) syntax(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return p.errorf(p.line(se.Offset), "%s", se.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return p.errorf(p.line(int64(len(p.data))), "the file ends inside a JSON value")
	}
	return p.errorf(p.line(p.dec.InputOffset()), "%s", err)
}

// object reads a JSON object, calling field with each key and its line
// (the value is next in the stream; field must consume it). Repeated keys
// are errors.
func (p *nsParser) object(what string, field func(key string, line int) error) error {
	tok, err := p.dec.Token()
	if err != nil {
		return p.syntax(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return p.errorf(p.line(p.dec.InputOffset()), "%s must be a JSON object, not %s", what, describeToken(tok))
	}
	seen := map[string]bool{}
	for p.dec.More() {
		tok, err := p.dec.Token()
		if err != nil {
			return p.syntax(err)
		}
		key, _ := tok.(string)
		line := p.line(p.dec.InputOffset())
		if seen[key] {
			return p.errorf(line, "%q appears twice in %s", key, what)
		}
		seen[key] = true
		if err := field(key, line); err != nil {
			return err
		}
	}
	if _, err := p.dec.Token(); err != nil { // the closing brace
		return p.syntax(err)
	}
	return nil
}

// quota reads one namespace's block.
func (p *nsParser) quota(what string) (store.Quota, error) {
	var q store.Quota
	err := p.object(what, func(key string, line int) error {
		var raw json.RawMessage
		if err := p.dec.Decode(&raw); err != nil {
			return p.syntax(err)
		}
		var err error
		switch key {
		case "max_bytes":
			q.MaxBytes, err = parseQuotaBytes(raw)
		case "max_entries":
			q.MaxEntries, err = parseQuotaCount(raw)
		case "max_idle":
			q.MaxIdle, err = parseQuotaDuration(raw)
		case "max_age":
			q.MaxAge, err = parseQuotaDuration(raw)
		default:
			return p.errorf(line, "%s: unknown field %q: use max_bytes, max_entries, max_idle or max_age", what, key)
		}
		if err != nil {
			return p.errorf(line, "%s: %s: %s", what, key, err)
		}
		return nil
	})
	return q, err
}

// describeToken names a JSON token for errors.
func describeToken(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return string(t)
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprint(tok)
}

// parseQuotaBytes parses max_bytes: a size string with --max-size's units
// or a JSON integer of bytes.
func parseQuotaBytes(raw json.RawMessage) (int64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		n, err := parseQuotaCount(raw)
		if err != nil {
			return 0, fmt.Errorf("%s is not a size: use a string such as \"50GB\" or \"10GiB\", or an integer of bytes", raw)
		}
		return n, nil
	}
	return parseSize(s) // flags.go
}

// parseQuotaCount parses a non-negative JSON integer.
func parseQuotaCount(raw json.RawMessage) (int64, error) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s is not a non-negative integer", raw)
	}
	return n, nil
}

// parseQuotaDuration parses a duration string: Go's syntax ("90m",
// "168h") or days ("30d", "1.5d").
func parseQuotaDuration(raw json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s is not a duration: use a string such as \"90m\", \"168h\" or \"30d\"", raw)
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		f, err := strconv.ParseFloat(days, 64)
		if err != nil || f < 0 || f > 100*365 {
			return 0, fmt.Errorf("%q is not a number of days (up to 36500)", s)
		}
		return time.Duration(f * 24 * float64(time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a non-negative duration: use e.g. \"90m\", \"168h\" or \"30d\"", s)
	}
	return d, nil
}

// admitConfigured tracks the namespaces a namespaces file names in the
// statistics under their own names. An operator configured them, so their
// lookups count as theirs from the first one: a sweep's first misses come
// before anything is stored there, and counted under "_other" they made
// the runs table say "_other, team-a" and left team-a's misses short.
func admitConfigured(sts *stats.Stats, q store.Quotas) {
	for ns := range q.Namespaces {
		sts.AdmitNamespace(ns)
	}
}

// reloadNamespaces reloads the namespaces file into hot, all or nothing: a
// file that does not parse keeps the quotas in force. It logs the outcome
// and counts it in m; the namespaces it names are admitted into sts.
func reloadNamespaces(path string, hot *store.Badger, sts *stats.Stats, logger *slog.Logger, m *api.NamespacesReloads) {
	old := hot.Quotas()
	q, err := loadNamespaces(path)
	if err == nil {
		err = hot.SetQuotas(q)
	}
	m.Observe(err)
	if err != nil {
		logger.Error("namespaces reload failed; keeping the quotas in force", "file", path, "err", err)
		return
	}
	admitConfigured(sts, q)
	added, removed, changed := diffQuotas(old, q)
	logger.Info("namespaces reloaded", "file", path, "namespaces", len(q.Namespaces), "added", added, "removed", removed,
		"changed", changed, "default_changed", old.Default != q.Default)
}

// diffQuotas names the namespaces added, removed and changed from a to b.
func diffQuotas(a, b store.Quotas) (added, removed, changed []string) {
	for ns, q := range b.Namespaces {
		if old, ok := a.Namespaces[ns]; !ok {
			added = append(added, ns)
		} else if old != q {
			changed = append(changed, ns)
		}
	}
	for ns := range a.Namespaces {
		if _, ok := b.Namespaces[ns]; !ok {
			removed = append(removed, ns)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	slices.Sort(changed)
	return added, removed, changed
}
