package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Open reads every entry's metadata to load the accounting (recover in
// badger.go), which needs only each entry's blob and last access: the
// helpers here decode just those, about twice as fast as decodeMeta, and
// share each namespace's name among its entries instead of allocating it
// per entry.

// scanEntries reads every entry's metadata at Open, for the accounting:
// entries whose record is unreadable or whose blob is not in blobs are
// appended to broken (to delete); the others' blobs are marked used.
func (s *Badger) scanEntries(txn *badger.Txn, found *foundBlobs, broken [][]byte) ([]loadedEntry, [][]byte) {
	var loaded []loadedEntry
	mit := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixMeta), PrefetchValues: false})
	defer mit.Close()
	names := nsInterner{}
	for mit.Rewind(); mit.Valid(); mit.Next() {
		item := mit.Item()
		ref, ok := names.parse(item.Key())
		if !ok {
			broken = append(broken, item.KeyCopy(nil))
			continue
		}
		var sha [32]byte
		var atime time.Time
		err := item.Value(func(v []byte) error {
			var err error
			sha, atime, err = decodeAcctMeta(ref, v) // recoverscan.go
			return err
		})
		if err != nil {
			s.log.Warn("dropping unreadable entry", "namespace", ref.ns, "key", ref.key.String(), "err", err)
			broken = append(broken, item.KeyCopy(nil))
			continue
		}
		size, ok := found.use(sha)
		if !ok {
			s.log.Warn("dropping entry whose blob is missing", "namespace", ref.ns, "key", ref.key.String())
			broken = append(broken, item.KeyCopy(nil))
			continue
		}
		loaded = append(loaded, loadedEntry{ref: ref, blob: sha, size: size, atime: atime})
	}
	return loaded, broken
}

// foundBlobs are the blob records found at Open, sorted by digest, with a
// radix index: starts[b] is the first record whose digest's top bits are
// b, about one record per bucket, so a lookup is two or three cache misses
// where maps of a million digests cost seconds to build and probe.
type foundBlobs struct {
	list   []foundBlob
	starts []int32
	shift  uint
}

// foundBlob is one blob record found at Open.
type foundBlob struct {
	sha  [32]byte
	u    uploadID
	size int64
	used bool // an entry or a held entry references it
}

// sort orders the list by digest (Badger lists the records in that order
// already, so this only checks) and builds the radix index.
func (f *foundBlobs) sort() {
	cmp := func(x, y foundBlob) int { return bytes.Compare(x.sha[:], y.sha[:]) }
	if !slices.IsSortedFunc(f.list, cmp) {
		slices.SortFunc(f.list, cmp)
	}
	k := uint(bits.Len(uint(len(f.list))))
	f.shift = 64 - k
	f.starts = make([]int32, 1<<k+1)
	b := 0
	for i, x := range f.list {
		for top := int(f.top(x.sha)); b <= top; b++ {
			f.starts[b] = int32(i)
		}
	}
	for ; b < len(f.starts); b++ {
		f.starts[b] = int32(len(f.list))
	}
}

// top returns the bucket of a digest.
func (f *foundBlobs) top(sha [32]byte) uint64 {
	if f.shift >= 64 {
		return 0
	}
	return binary.BigEndian.Uint64(sha[:8]) >> f.shift
}

// find returns the index of sha in the list.
func (f *foundBlobs) find(sha [32]byte) (int, bool) {
	if len(f.list) == 0 {
		return 0, false
	}
	b := f.top(sha)
	for i := f.starts[b]; i < f.starts[b+1]; i++ {
		if f.list[i].sha == sha {
			return int(i), true
		}
	}
	return 0, false
}

// use marks sha used and returns its size; ok is false when no record of
// it was found.
func (f *foundBlobs) use(sha [32]byte) (size int64, ok bool) {
	i, ok := f.find(sha)
	if !ok {
		return 0, false
	}
	f.list[i].used = true
	return f.list[i].size, true
}

// acctMetaRecord is the part of a metaRecord the accounting loads.
type acctMetaRecord struct {
	Meta struct {
		Created    time.Time `json:"created"`
		LastAccess time.Time `json:"last_access"`
	} `json:"meta"`
	SHA256 string `json:"sha256"`
}

// decodeAcctMeta decodes the blob digest and last access (its creation when
// it was never accessed) of the metadata record b of ref. It scans the
// record by hand (scanAcctMeta) and falls back to encoding/json, which also
// gives the error, for a record the scan does not read.
func decodeAcctMeta(ref entryRef, b []byte) (sha [32]byte, atime time.Time, err error) {
	var rec acctMetaRecord
	if !scanAcctMeta(b, &rec) {
		rec = acctMetaRecord{}
		if err := json.Unmarshal(b, &rec); err != nil {
			return sha, atime, fmt.Errorf("decode metadata of %s/%s: %w", ref.ns, ref.key, err)
		}
	}
	if len(rec.SHA256) != 2*len(sha) {
		return sha, atime, fmt.Errorf("decode metadata of %s/%s: bad sha256 %q", ref.ns, ref.key, rec.SHA256)
	}
	if _, err := hex.Decode(sha[:], []byte(rec.SHA256)); err != nil {
		return sha, atime, fmt.Errorf("decode metadata of %s/%s: bad sha256 %q", ref.ns, ref.key, rec.SHA256)
	}
	atime = rec.Meta.LastAccess
	if atime.IsZero() {
		atime = rec.Meta.Created
	}
	return sha, atime, nil
}

// scanAcctMeta reads the fields of acctMetaRecord from b, a JSON object,
// skipping the others, and reports whether it could: false for anything
// unusual (an escape in a name or a digest, a time that does not parse,
// bytes after the object), which the caller hands to encoding/json.
// encoding/json's reflection and validation were half of a restart's time.
func scanAcctMeta(b []byte, rec *acctMetaRecord) bool {
	sc := jsonScan{b: b}
	ok := sc.object(func(name []byte) bool {
		switch string(name) {
		case "meta":
			return sc.object(func(name []byte) bool {
				switch string(name) {
				case "created":
					return sc.time(&rec.Meta.Created)
				case "last_access":
					return sc.time(&rec.Meta.LastAccess)
				}
				return sc.skip()
			})
		case "sha256":
			v, ok := sc.str()
			rec.SHA256 = string(v)
			return ok
		}
		return sc.skip()
	})
	sc.space()
	return ok && sc.i == len(b)
}

// decodeBlobScan is decodeBlob by a hand scan (a restart reads every blob
// record), with decodeBlob as the fallback and for the error.
func decodeBlobScan(b []byte) (blobRecord, error) {
	var r blobRecord
	sc := jsonScan{b: b}
	ok := sc.object(func(name []byte) bool {
		switch string(name) {
		case "upload":
			v, ok := sc.str()
			r.Upload = string(v)
			return ok
		case "size":
			return sc.int(&r.Size)
		case "chunk_size":
			return sc.int(&r.ChunkSize)
		}
		return sc.skip()
	})
	sc.space()
	if ok && sc.i == len(b) && r.ChunkSize > 0 && r.Size >= 0 {
		return r, nil
	}
	return decodeBlob(b) // and its error for a bad size
}

// jsonScan is a cursor over JSON text for scanAcctMeta.
type jsonScan struct {
	b []byte
	i int
}

func (sc *jsonScan) space() {
	for sc.i < len(sc.b) && (sc.b[sc.i] == ' ' || sc.b[sc.i] == '\n' || sc.b[sc.i] == '\t' || sc.b[sc.i] == '\r') {
		sc.i++
	}
}

// next skips space and consumes c.
func (sc *jsonScan) next(c byte) bool {
	sc.space()
	if sc.i < len(sc.b) && sc.b[sc.i] == c {
		sc.i++
		return true
	}
	return false
}

// object reads an object, calling field for each member with the cursor on
// its value (which field must consume).
func (sc *jsonScan) object(field func(name []byte) bool) bool {
	if !sc.next('{') {
		return false
	}
	if sc.next('}') {
		return true
	}
	for {
		name, ok := sc.str()
		if !ok || !sc.next(':') || !field(name) {
			return false
		}
		if sc.next('}') {
			return true
		}
		if !sc.next(',') {
			return false
		}
	}
}

// str reads a string without escapes and returns its bytes.
func (sc *jsonScan) str() ([]byte, bool) {
	if !sc.next('"') {
		return nil, false
	}
	start := sc.i
	for sc.i < len(sc.b) {
		switch c := sc.b[sc.i]; {
		case c == '"':
			sc.i++
			return sc.b[start : sc.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		sc.i++
	}
	return nil, false
}

// int reads an integer number.
func (sc *jsonScan) int(v *int64) bool {
	sc.space()
	start := sc.i
	for sc.i < len(sc.b) && (sc.b[sc.i] == '-' || '0' <= sc.b[sc.i] && sc.b[sc.i] <= '9') {
		sc.i++
	}
	n, err := strconv.ParseInt(string(sc.b[start:sc.i]), 10, 64)
	*v = n
	return err == nil
}

// time reads a string holding an RFC 3339 time (as time.Time marshals).
func (sc *jsonScan) time(t *time.Time) bool {
	v, ok := sc.str()
	return ok && t.UnmarshalText(v) == nil
}

// skip consumes one value of any kind. Strings may hold escapes; numbers
// and literals are checked loosely (their characters), which is enough for
// records the store wrote itself.
func (sc *jsonScan) skip() bool {
	sc.space()
	if sc.i >= len(sc.b) {
		return false
	}
	switch sc.b[sc.i] {
	case '{':
		return sc.object(func([]byte) bool { return sc.skip() })
	case '[':
		sc.i++
		if sc.next(']') {
			return true
		}
		for {
			if !sc.skip() {
				return false
			}
			if sc.next(']') {
				return true
			}
			if !sc.next(',') {
				return false
			}
		}
	case '"':
		for sc.i++; sc.i < len(sc.b); sc.i++ {
			switch c := sc.b[sc.i]; {
			case c == '\\':
				sc.i++
			case c == '"':
				sc.i++
				return true
			case c < 0x20:
				return false
			}
		}
		return false
	}
	for _, lit := range []string{"true", "false", "null"} {
		if len(sc.b)-sc.i >= len(lit) && string(sc.b[sc.i:sc.i+len(lit)]) == lit {
			sc.i += len(lit)
			return true
		}
	}
	start := sc.i
	for sc.i < len(sc.b) && strings.IndexByte("0123456789-+.eE", sc.b[sc.i]) >= 0 {
		sc.i++
	}
	return sc.i > start
}

// nsInterner returns one string per distinct namespace name.
type nsInterner map[string]string

// parse is parseEntryKey with the namespace interned.
func (in nsInterner) parse(k []byte) (entryRef, bool) {
	if len(k) < 2+1+1+len(Key{}) {
		return entryRef{}, false
	}
	nsEnd := len(k) - len(Key{}) - 1
	if k[nsEnd] != 0 {
		return entryRef{}, false
	}
	var ref entryRef
	name := k[2:nsEnd]
	ns, ok := in[string(name)] // no allocation for the lookup
	if !ok {
		ns = string(name)
		in[ns] = ns
	}
	ref.ns = ns
	copy(ref.key[:], k[nsEnd+1:])
	return ref, true
}
