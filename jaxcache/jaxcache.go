// Package jaxcache reads and writes a directory in the layout of JAX's
// persistent compilation cache (jax._src.lru_cache.LRUCache, JAX 0.10.x):
// one file "<key>-cache" holding the compressed value per JAX cache key, and
// beside it "<key>-atime" holding the last access time as 8 little-endian
// bytes of Unix nanoseconds.
//
// Writes are atomic: the value goes to a temp file in the same directory
// (named so that JAX's "*-cache" glob never matches it), is synced, and is
// renamed into place; the -atime file is written first, because JAX's
// eviction (with jax_compilation_cache_max_size set) reads the -atime of
// every -cache file it sees. JAX itself writes -cache files in place, not
// atomically, and writes -atime only when eviction is enabled; Complete
// tells whether such a file is whole.
package jaxcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// File name suffixes used by JAX's LRUCache.
const (
	CacheSuffix = "-cache"
	AtimeSuffix = "-atime"
	tempPrefix  = ".cachesvc-tmp-"
)

// Sentinel errors.
var (
	// ErrNotWritable means the directory cannot be created or written.
	ErrNotWritable = errors.New("jax cache dir is not writable")
	// ErrInvalidName means a name is not a JAX cache key usable as a file name.
	ErrInvalidName = errors.New("invalid jax cache key")
	// ErrDigestMismatch means the bytes written do not match the expected SHA-256.
	ErrDigestMismatch = errors.New("content does not match the expected sha256")
)

// nameRE matches JAX cache keys: "<module name>-<64 hex>". The module name is
// kept to file-name-safe characters.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+=,-]{0,150}-[0-9a-f]{64}$`)

// ValidateName reports whether name is a JAX cache key that can name a file
// in the directory ("jit_f-<64 hex>"). Names come from the server, so this is
// also the guard against path traversal.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w %q: want <module name>-<64 lowercase hex>, with the module name made of letters, digits and _.+=,-", ErrInvalidName, name)
	}
	return nil
}

// Dir is a JAX cache directory. Its methods are safe for concurrent use by
// several processes: every write is a rename.
type Dir struct {
	path string
}

// Open returns the directory at path, creating it (and parents) if needed,
// and checks that it is writable by creating and removing a temp file.
//
// # Errors
//   - ErrNotWritable (wrapped with the cause) when the directory cannot be
//     created, is not a directory, or a file cannot be created in it.
func Open(path string) (*Dir, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: no directory given", ErrNotWritable)
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("%w: create %s: %w", ErrNotWritable, path, err)
	}
	f, err := os.CreateTemp(path, tempPrefix+"probe-*")
	if err != nil {
		return nil, fmt.Errorf("%w: create a file in %s: %w", ErrNotWritable, path, err)
	}
	f.Close()
	os.Remove(f.Name())
	return &Dir{path: path}, nil
}

// Path returns the directory's path.
func (d *Dir) Path() string { return d.path }

// CachePath returns the path of name's -cache file.
func (d *Dir) CachePath(name string) string { return filepath.Join(d.path, name+CacheSuffix) }

// Has reports whether name's -cache file exists.
func (d *Dir) Has(name string) bool {
	_, err := os.Lstat(d.CachePath(name))
	return err == nil
}

// Write stores the value read from r under name, unless name is already
// present, in which case it reads nothing and returns written=false. When
// wantSHA256 is non-empty (64 hex) the bytes are checked before they become
// visible. The -atime file is set to now.
//
// # Errors
//   - ErrInvalidName for a name that is not a JAX cache key.
//   - ErrDigestMismatch when the bytes do not match wantSHA256; nothing is
//     left behind.
//   - a wrapped I/O error otherwise; temp files are removed.
func (d *Dir) Write(name string, r io.Reader, wantSHA256 string, now time.Time) (written bool, err error) {
	if err := ValidateName(name); err != nil {
		return false, err
	}
	if d.Has(name) {
		return false, nil
	}
	var ts [8]byte
	binary.LittleEndian.PutUint64(ts[:], uint64(now.UnixNano()))
	if err := d.writeAtomic(name+AtimeSuffix, func(w io.Writer) error {
		_, err := w.Write(ts[:])
		return err
	}); err != nil {
		return false, err
	}
	if err := d.writeAtomic(name+CacheSuffix, func(w io.Writer) error {
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(w, h), r); err != nil {
			return fmt.Errorf("copy value: %w", err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); wantSHA256 != "" && got != wantSHA256 {
			return fmt.Errorf("%w: got %s, want %s", ErrDigestMismatch, got, wantSHA256)
		}
		return nil
	}); err != nil {
		os.Remove(filepath.Join(d.path, name+AtimeSuffix))
		return false, err
	}
	return true, nil
}

// writeAtomic writes file through a synced temp file and a rename; on error
// the temp file is removed. An existing target is replaced.
func (d *Dir) writeAtomic(file string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(d.path, tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("%w: create temp file in %s: %w", ErrNotWritable, d.path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", file, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("chmod %s: %w", file, err)
	}
	if err := os.Rename(f.Name(), filepath.Join(d.path, file)); err != nil {
		return fmt.Errorf("rename into %s: %w", file, err)
	}
	return nil
}

// Entry is a -cache file found by Scan.
type Entry struct {
	Name    string // the JAX cache key
	Size    int64
	ModTime time.Time
	// HasAtime reports whether the -atime file exists.
	HasAtime bool
}

// Scan lists the -cache files whose names are JAX cache keys, ignoring temp
// files and anything else. It does not say whether a file is complete; see
// Complete.
func (d *Dir) Scan() ([]Entry, error) {
	des, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", d.path, err)
	}
	atimes := make(map[string]bool)
	for _, de := range des {
		if n, ok := strings.CutSuffix(de.Name(), AtimeSuffix); ok {
			atimes[n] = true
		}
	}
	var out []Entry
	for _, de := range des {
		n, ok := strings.CutSuffix(de.Name(), CacheSuffix)
		if !ok || !de.Type().IsRegular() || ValidateName(n) != nil {
			continue
		}
		info, err := de.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", de.Name(), err)
		}
		out = append(out, Entry{Name: n, Size: info.Size(), ModTime: info.ModTime(), HasAtime: atimes[n]})
	}
	return out, nil
}
