package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// FormatVersion is the store format this binary reads and writes. It is
// raised only when a binary that reads an older format would misread or
// destroy what this one writes, so that an older binary refuses a directory
// it cannot handle instead of damaging it. History:
//
//	1  before 2026-12-01: a quarantine deleted the entry's bytes. Such a
//	   binary (it predates the marker) deletes the bytes that format 2
//	   keeps for quarantined entries, as unused, when it opens the store.
//	2  a quarantined entry keeps its bytes under q/ (restorable); the
//	   directory carries a FormatFile.
const FormatVersion = 2

// FormatFile is the name, inside the store's directory, of the file that
// records its format: JSON {"format": N, "written_by": "..."}. A directory
// without it was written by a binary older than the marker (format 2 or
// lower) or is new; Open writes it either way.
const FormatFile = "cachesvc-format.json"

// ErrNewerFormat means data was written in a format newer than this binary
// reads, by a newer binary: Open found a directory of a store format above
// FormatVersion, or a shared tier found a record of a newer version. The
// data is left as it is.
var ErrNewerFormat = errors.New("written in a newer format than this binary reads")

// formatRecord is FormatFile's content.
type formatRecord struct {
	Format int `json:"format"`
	// WrittenBy is the version of the binary that last wrote the marker
	// (Config.Version), to name in a refusal.
	WrittenBy string `json:"written_by,omitempty"`
}

// maxFormatFile bounds a read of FormatFile: a larger file is not one.
const maxFormatFile = 64 << 10

// checkFormat reads dir's format marker and refuses a directory in a newer
// format than FormatVersion, naming both formats and what to do. A missing
// marker is a new directory or one from before the marker; it passes.
func checkFormat(dir, version string) error {
	path := filepath.Join(dir, FormatFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the store format: %w", err)
	}
	defer f.Close()
	var rec formatRecord
	dec := json.NewDecoder(io.LimitReader(f, maxFormatFile))
	if err := dec.Decode(&rec); err != nil || rec.Format < 1 {
		if err == nil {
			err = fmt.Errorf("format %d", rec.Format)
		}
		return fmt.Errorf("%s does not hold a store format (want {\"format\": N}: %v); restore it from a backup, or delete it if this directory was last served by a cachesvc of store format %d or older",
			path, err, FormatVersion)
	}
	if rec.Format > FormatVersion {
		by := rec.WrittenBy
		if by == "" {
			by = "a newer cachesvc"
		}
		return fmt.Errorf("%w: store format %d (written by %s), but this binary (%s) reads store format %d at most; "+
			"run the newer binary on it again, or give this one an empty --data directory (a fleet replica refills its hot tier from the bucket; "+
			"a single server can take the entries over by admin export from the newer server and admin import)",
			ErrNewerFormat, rec.Format, by, orDev(version), FormatVersion)
	}
	return nil
}

// writeFormat records FormatVersion in dir's marker (a temporary file,
// fsynced, renamed over it), unless it already says so.
func writeFormat(dir, version string) error {
	path := filepath.Join(dir, FormatFile)
	if f, err := os.Open(path); err == nil {
		var rec formatRecord
		err := json.NewDecoder(io.LimitReader(f, maxFormatFile)).Decode(&rec)
		f.Close()
		if err == nil && rec.Format == FormatVersion && rec.WrittenBy == version {
			return nil
		}
	}
	b, err := json.Marshal(formatRecord{Format: FormatVersion, WrittenBy: version})
	if err != nil {
		return fmt.Errorf("write the store format: %w", err)
	}
	tmp, err := os.CreateTemp(dir, FormatFile+".tmp*")
	if err != nil {
		return fmt.Errorf("write the store format: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if _, err := tmp.Write(append(b, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write the store format: %w", err)
	}
	return nil
}

// orDev names a binary whose Config.Version is unset.
func orDev(version string) string {
	if version == "" {
		return "cachesvc of store format " + fmt.Sprint(FormatVersion)
	}
	return version
}
