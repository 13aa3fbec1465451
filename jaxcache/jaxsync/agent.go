package jaxsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/jaxcache"
)

// StateFile is the default name of the agent's state file, kept in the JAX
// cache directory (JAX only looks at "*-cache" and "*-atime" files).
const StateFile = ".cachesvc-agent.json"

// AgentConfig configures an Agent.
type AgentConfig struct {
	// Client uploads; set its Run to tag uploads with X-Cachesvc-Run.
	Client    *client.Client
	Namespace string
	Dir       *jaxcache.Dir
	// StatePath is where the agent remembers what it uploaded; "" means
	// StateFile in Dir.
	StatePath string
	// Interval between polls (1s when 0).
	Interval time.Duration
	Logger   *slog.Logger
}

// uploaded is what the state file remembers per JAX key.
type uploaded struct {
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Conflict is set when the server holds different bytes under the key
	// (first writer wins); the file is not retried.
	Conflict bool `json:"conflict,omitempty"`
}

type agentState struct {
	Version  int                 `json:"version"`
	Uploaded map[string]uploaded `json:"uploaded"`
}

type observed struct {
	size    int64
	modTime time.Time
	// rejected is set when the file was stable but not a complete JAX value;
	// it is inspected again only when it changes.
	rejected bool
}

// Agent uploads complete new entries of a JAX cache directory. It polls
// (portable, no inotify limits) and uploads a "<key>-cache" file once its
// size and mtime were the same on two polls in a row and it decompresses to
// its end (JAX writes the file in place, not atomically, and writes -atime
// only with eviction on, so neither rename nor -atime can signal
// completion). It remembers what it uploaded in a state file written
// atomically, so a restart uploads nothing twice. It is not safe for
// concurrent use: call Poll or Run from one goroutine.
type Agent struct {
	cfg   AgentConfig
	log   *slog.Logger
	state agentState
	seen  map[string]observed
}

// AgentStats counts one poll's work.
type AgentStats struct {
	Uploaded  int // new uploads (created or already stored)
	Pending   int // files not yet stable or complete
	Failed    int // upload errors, retried next poll
	Conflicts int
}

// NewAgent loads the state file (if any) and returns an agent.
func NewAgent(cfg AgentConfig) (*Agent, error) {
	if cfg.Client == nil || cfg.Dir == nil {
		return nil, errors.New("new agent: Client and Dir are required")
	}
	if cfg.StatePath == "" {
		cfg.StatePath = filepath.Join(cfg.Dir.Path(), StateFile)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a := &Agent{cfg: cfg, log: cfg.Logger, seen: make(map[string]observed),
		state: agentState{Version: 1, Uploaded: make(map[string]uploaded)}}
	data, err := os.ReadFile(cfg.StatePath)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read agent state: %w", err)
	default:
		if err := json.Unmarshal(data, &a.state); err != nil {
			return nil, fmt.Errorf("decode agent state %s (delete it to upload everything again): %w", cfg.StatePath, err)
		}
		if a.state.Uploaded == nil {
			a.state.Uploaded = make(map[string]uploaded)
		}
	}
	return a, nil
}

// Uploaded reports how many files the state file lists.
func (a *Agent) Uploaded() int { return len(a.state.Uploaded) }

// MarkPresent records that the directory's current files came from the
// server (after a warm), so they are not uploaded back.
func (a *Agent) MarkPresent() error {
	es, err := a.cfg.Dir.Scan()
	if err != nil {
		return err
	}
	for _, e := range es {
		if _, ok := a.state.Uploaded[e.Name]; !ok {
			a.state.Uploaded[e.Name] = uploaded{Size: e.Size}
		}
	}
	return a.saveState()
}

// Run polls every Interval until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := a.Poll(ctx); err != nil {
			a.log.Warn("agent poll failed; retrying next poll", "dir", a.cfg.Dir.Path(), "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Poll scans the directory once and uploads every file that is complete
// and not yet uploaded.
//
// # Errors
// A failure that every upload would share (the server does not answer, or
// refuses the token) ends the poll at once with that error; the files are
// tried again on the next poll. A failure of one file is logged and counted
// in AgentStats.Failed, and the poll goes on.
func (a *Agent) Poll(ctx context.Context) (AgentStats, error) {
	var st AgentStats
	es, err := a.cfg.Dir.Scan()
	if err != nil {
		return st, err
	}
	current := make(map[string]bool, len(es))
	changed := false
	for _, e := range es {
		current[e.Name] = true
		if u, ok := a.state.Uploaded[e.Name]; ok && u.Size == e.Size {
			continue
		}
		prev, seenBefore := a.seen[e.Name]
		a.seen[e.Name] = observed{size: e.Size, modTime: e.ModTime, rejected: prev.rejected && prev.size == e.Size && prev.modTime.Equal(e.ModTime)}
		if !seenBefore || prev.size != e.Size || !prev.modTime.Equal(e.ModTime) || e.Size == 0 {
			st.Pending++
			continue
		}
		if a.seen[e.Name].rejected {
			st.Pending++
			continue
		}
		u, err := a.upload(ctx, e)
		switch {
		case errors.Is(err, jaxcache.ErrIncomplete):
			o := a.seen[e.Name]
			o.rejected = true
			a.seen[e.Name] = o
			a.log.Info("agent: file is stable but not a complete JAX value; waiting for it to change", "file", e.Name+jaxcache.CacheSuffix, "err", err)
			st.Pending++
			continue
		case err != nil:
			st.Failed++
			delete(a.seen, e.Name)
			if serverWide(err) {
				// Every other file would fail the same way: one error per
				// poll, not one per file.
				return st, a.finish(changed, tokenHint(err, a.cfg.Namespace))
			}
			a.log.Warn("agent: upload failed; retrying next poll", "namespace", a.cfg.Namespace, "name", e.Name, "err", err)
			continue
		}
		if u.Conflict {
			st.Conflicts++
		} else {
			st.Uploaded++
		}
		a.state.Uploaded[e.Name] = u
		changed = true
	}
	for n := range a.seen {
		if !current[n] {
			delete(a.seen, n)
		}
	}
	// Forget files that are gone (evicted or deleted), so the state stays
	// as small as the directory; one that comes back is uploaded again, a
	// no-op on the server.
	for n := range a.state.Uploaded {
		if !current[n] {
			delete(a.state.Uploaded, n)
			changed = true
		}
	}
	return st, a.finish(changed, nil)
}

// finish saves the state if it changed and returns err, or the save's error.
func (a *Agent) finish(changed bool, err error) error {
	if changed {
		if serr := a.saveState(); serr != nil {
			return serr
		}
	}
	return err
}

// serverWide reports whether an upload's error is about the server or the
// token, not the file: nothing answers, or the token is refused.
func serverWide(err error) bool {
	var ue *url.Error
	var ce *client.Error
	return errors.As(err, &ue) || errors.As(err, &ce) && (ce.Status == http.StatusUnauthorized || ce.Status == http.StatusForbidden)
}

// tokenHint adds what to do to a refused token's error.
func tokenHint(err error, ns string) error {
	var ce *client.Error
	if errors.As(err, &ce) && (ce.Status == http.StatusUnauthorized || ce.Status == http.StatusForbidden) {
		return fmt.Errorf("%w (the agent needs a token with write scope on namespace %q: --token-file or CACHESVC_TOKEN_FILE)", err, ns)
	}
	return err
}

// upload checks that e is a complete JAX value and stores it under its
// passthrough key.
func (a *Agent) upload(ctx context.Context, e jaxcache.Entry) (uploaded, error) {
	path := a.cfg.Dir.CachePath(e.Name)
	f, err := os.Open(path)
	if err != nil {
		return uploaded{}, err // names the path
	}
	h := sha256.New()
	v, err := jaxcache.InspectReader(io.TeeReader(f, h))
	f.Close()
	if err != nil {
		return uploaded{}, err
	}
	sum := h.Sum(nil)
	kr, err := a.cfg.Client.Keys(ctx, a.cfg.Namespace, client.JAXKeySignature(e.Name))
	if err != nil {
		return uploaded{}, fmt.Errorf("key for %s: %w", e.Name, err)
	}
	f, err = os.Open(path)
	if err != nil {
		return uploaded{}, err // names the path
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return uploaded{}, err // names the path
	}
	u := uploaded{Key: kr.Key, Size: info.Size(), SHA256: hex.EncodeToString(sum)}
	created, err := a.cfg.Client.Put(ctx, a.cfg.Namespace, kr.Key, f, client.PutOptions{
		Size: info.Size(), SHA256: sum, Name: e.Name, Backend: "passthrough",
		CompileSeconds: float64(v.CompileSeconds),
	})
	var ce *client.Error
	if errors.As(err, &ce) && ce.Status == http.StatusConflict {
		a.log.Warn("agent: the server holds different bytes under this JAX key (first writer wins); not retrying", "namespace", a.cfg.Namespace, "name", e.Name, "key", kr.Key)
		u.Conflict = true
		return u, nil
	}
	if err != nil {
		return uploaded{}, fmt.Errorf("upload %s: %w", e.Name, err)
	}
	a.log.Info("agent: uploaded", "namespace", a.cfg.Namespace, "name", e.Name, "key", kr.Key, "size", u.Size, "created", created)
	return u, nil
}

// saveState writes the state file atomically.
func (a *Agent) saveState() (err error) {
	data, err := json.Marshal(a.state)
	if err != nil {
		return fmt.Errorf("encode agent state: %w", err)
	}
	dir := filepath.Dir(a.cfg.StatePath)
	f, err := os.CreateTemp(dir, ".cachesvc-agent-state-*")
	if err != nil {
		return fmt.Errorf("save agent state: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("save agent state: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("save agent state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save agent state: %w", err)
	}
	if err := os.Rename(f.Name(), a.cfg.StatePath); err != nil {
		return fmt.Errorf("save agent state: %w", err)
	}
	return nil
}
