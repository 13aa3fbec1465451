package plugins

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"sort"
	"sync"
)

// ReloadReport is what Host.ReloadDir changed, by plugin name. Each list is
// sorted by name.
type ReloadReport struct {
	// Added are plugins whose name no file of the directory had before.
	Added []Info
	// Replaced are plugins whose file changed (or whose name moved to
	// another file): New serves from now on, Old drained.
	Replaced []Replacement
	// Removed are plugins no file of the directory has any more; they
	// drained.
	Removed []Info
	// Unchanged are plugins whose file has the same bytes: the same *Plugin,
	// with its warm instances, keeps serving.
	Unchanged []Info
}

// Replacement is one replaced plugin of a ReloadReport.
type Replacement struct {
	// Old is the plugin that drained; New serves instead.
	Old, New Info
}

// SameVersion reports whether the new file kept the old one's name@version:
// its code serves from now on, but keys hash only name@version, so nothing
// tells a key it made from one the old code made. That is right for a
// rebuild that canonicalizes as before, and wrong for a change that does
// not: the caller should warn.
func (r Replacement) SameVersion() bool { return r.Old.ID == r.New.ID }

// Changed reports whether the reload added, replaced or removed anything.
func (r ReloadReport) Changed() bool {
	return len(r.Added)+len(r.Replaced)+len(r.Removed) > 0
}

// ReloadDir makes the plugins loaded from files (by LoadDir or an earlier
// ReloadDir) exactly the *.wasm files now in dir, all or nothing.
//
// It first reads and compiles every file, outside the host's lock, so calls
// go on meanwhile. If every file loads and no two claim one name or backend,
// it swaps the new set in at once: from then on ForBackend returns the new
// plugins. A file whose path and bytes are unchanged keeps its *Plugin (and
// its warm instances). The plugins it removes or replaces drain (see
// Plugin.Drain): calls already running on them finish normally, for up to
// Config.AcquireTimeout + Config.CallTimeout, and then their instances and
// compiled code are released; ReloadDir returns after that. Built-ins and
// plugins added with Load are never touched. Reloads are serialized.
//
// # Errors
//
// If dir cannot be listed, or any file cannot be read, fails to compile or
// describe itself (ErrInvalid), or claims a name or backend that another
// file, a built-in or a plugin added with Load also claims (ErrDuplicate),
// ReloadDir returns an error naming the file and why, and changes nothing.
// ErrClosed if the host is closed.
func (h *Host) ReloadDir(ctx context.Context, dir string) (ReloadReport, error) {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	_ = h.Ready() // deferred built-ins must be registered to be checked against
	paths, err := listDir(dir)
	if err != nil {
		return ReloadReport{}, fmt.Errorf("reload plugins: %w", err)
	}
	h.mu.RLock()
	current := maps.Clone(h.fromDir)
	h.mu.RUnlock()

	// Phase 1: read and compile everything new, without the lock.
	next := make(map[string]*Plugin, len(paths)) // by path
	var fresh []*Plugin
	discard := func() {
		for _, p := range fresh {
			p.Close(ctx)
		}
	}
	for _, path := range paths {
		wasm, err := os.ReadFile(path)
		if err != nil {
			discard()
			return ReloadReport{}, fmt.Errorf("reload plugins from %s: read plugin: %w", dir, err)
		}
		if old, ok := current[path]; ok && old.digest == sha256.Sum256(wasm) {
			next[path] = old
			continue
		}
		p, err := h.Compile(ctx, path, wasm)
		if err != nil {
			discard()
			return ReloadReport{}, fmt.Errorf("reload plugins from %s: %w", dir, err)
		}
		fresh = append(fresh, p)
		next[path] = p
	}

	// Phase 2: check the new set against itself and the fixed plugins, and
	// swap it in.
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		discard()
		return ReloadReport{}, ErrClosed
	}
	byName, byBackend, err := h.withDirSet(paths, next)
	if err != nil {
		h.mu.Unlock()
		discard()
		return ReloadReport{}, fmt.Errorf("reload plugins from %s: %w", dir, err)
	}
	old := h.fromDir
	h.byName, h.byBackend, h.fromDir = byName, byBackend, next
	h.mu.Unlock()

	report, retired := diffDirSets(old, next)
	// Phase 3: drain what left, all at once so the wait is bounded by one
	// call's limits.
	wait := h.cfg.AcquireTimeout + h.cfg.CallTimeout
	var wg sync.WaitGroup
	for _, p := range retired {
		wg.Go(func() { p.Drain(ctx, wait) })
	}
	wg.Wait()
	return report, nil
}

// withDirSet returns the host's routing tables with the plugins from files
// replaced by next (whose files are paths, sorted), or an error naming the
// first file that claims a taken name or backend. h.mu must be held.
func (h *Host) withDirSet(paths []string, next map[string]*Plugin) (byName, byBackend map[string]*Plugin, err error) {
	byName = maps.Clone(h.byName)
	byBackend = maps.Clone(h.byBackend)
	for _, p := range h.fromDir {
		delete(byName, p.info.Name)
		for _, b := range p.info.Backends {
			delete(byBackend, b)
		}
	}
	for _, path := range paths {
		if err := register(byName, byBackend, next[path]); err != nil {
			return nil, nil, fmt.Errorf("plugin %s: %w", path, err)
		}
	}
	return byName, byBackend, nil
}

// diffDirSets compares two sets of plugins from files (by path) by name, and
// returns the plugins of old that next does not keep.
func diffDirSets(old, next map[string]*Plugin) (ReloadReport, []*Plugin) {
	oldByName := map[string]*Plugin{}
	for _, p := range old {
		oldByName[p.info.Name] = p
	}
	kept := map[*Plugin]bool{}
	var r ReloadReport
	for _, p := range next {
		was, ok := oldByName[p.info.Name]
		switch {
		case !ok:
			r.Added = append(r.Added, p.Info())
		case was == p:
			r.Unchanged = append(r.Unchanged, p.Info())
			kept[p] = true
		default:
			r.Replaced = append(r.Replaced, Replacement{Old: was.Info(), New: p.Info()})
		}
	}
	var retired []*Plugin
	for _, p := range old {
		if kept[p] {
			continue
		}
		retired = append(retired, p)
		if !hasName(next, p.info.Name) {
			r.Removed = append(r.Removed, p.Info())
		}
	}
	byName := func(a, b Info) bool { return a.Name < b.Name }
	sort.Slice(r.Added, func(i, j int) bool { return byName(r.Added[i], r.Added[j]) })
	sort.Slice(r.Removed, func(i, j int) bool { return byName(r.Removed[i], r.Removed[j]) })
	sort.Slice(r.Unchanged, func(i, j int) bool { return byName(r.Unchanged[i], r.Unchanged[j]) })
	sort.Slice(r.Replaced, func(i, j int) bool { return byName(r.Replaced[i].New, r.Replaced[j].New) })
	return r, retired
}

func hasName(set map[string]*Plugin, name string) bool {
	for _, p := range set {
		if p.info.Name == name {
			return true
		}
	}
	return false
}
