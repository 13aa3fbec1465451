package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/dgraph-io/badger/v4"
)

// Badger key layout. Namespaces never contain 0x00, so "m/ns\x00key" sorts by
// namespace, then key.
//
//	m/<ns>\x00<key:32>        entry metadata (metaRecord, JSON)
//	q/<ns>\x00<key:32>        quarantined entry metadata (metaRecord, JSON)
//	r/<ns>\x00<key:32>        reports that an entry failed to load (reportsRecord, JSON)
//	b/<sha256:32>             blob record (blobRecord, JSON)
//	c/<upload:16><index:4BE>  chunk: crc32c (4 bytes BE) then data
//
// Chunks are written under a random upload id before the blob record that
// names that upload id is committed; chunks whose upload id no blob names are
// orphans, collected when the store opens.
const (
	prefixMeta       = "m/"
	prefixQuarantine = "q/"
	prefixReports    = "r/"
	prefixBlob       = "b/"
	prefixChunk      = "c/"
)

// uploadID names the chunks of one upload.
type uploadID [16]byte

func newUploadID() uploadID {
	var u uploadID
	if _, err := rand.Read(u[:]); err != nil {
		panic(fmt.Sprintf("read random upload id: %v", err))
	}
	return u
}

func (u uploadID) String() string { return hex.EncodeToString(u[:]) }

func entryKey(prefix, ns string, key Key) []byte {
	b := make([]byte, 0, len(prefix)+len(ns)+1+cachekey.KeySize)
	b = append(b, prefix...)
	b = append(b, ns...)
	b = append(b, 0)
	return append(b, key[:]...)
}

func metaKey(ns string, key Key) []byte { return entryKey(prefixMeta, ns, key) }

// metaPrefix returns the prefix of every entry in ns, or of every entry when
// ns is empty.
func metaPrefix(ns string) []byte {
	if ns == "" {
		return []byte(prefixMeta)
	}
	b := append([]byte(prefixMeta), ns...)
	return append(b, 0)
}

// parseEntryKey splits a metadata or quarantine key into namespace and key.
func parseEntryKey(k []byte) (entryRef, bool) {
	if len(k) < 2+1+1+cachekey.KeySize {
		return entryRef{}, false
	}
	nsEnd := len(k) - cachekey.KeySize - 1
	if k[nsEnd] != 0 {
		return entryRef{}, false
	}
	var ref entryRef
	ref.ns = string(k[2:nsEnd])
	copy(ref.key[:], k[nsEnd+1:])
	return ref, true
}

func blobKey(sha [32]byte) []byte {
	return append([]byte(prefixBlob), sha[:]...)
}

func chunkPrefix(u uploadID) []byte {
	return append([]byte(prefixChunk), u[:]...)
}

func chunkKey(u uploadID, idx uint32) []byte {
	b := make([]byte, 0, len(prefixChunk)+len(u)+4)
	b = append(b, prefixChunk...)
	b = append(b, u[:]...)
	return binary.BigEndian.AppendUint32(b, idx)
}

// parseChunkKey returns the upload id of a chunk key.
func parseChunkKey(k []byte) (uploadID, bool) {
	var u uploadID
	if len(k) != len(prefixChunk)+len(u)+4 {
		return u, false
	}
	copy(u[:], k[len(prefixChunk):])
	return u, true
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunkSum is the checksum stored with a chunk. It covers the upload id and
// index as well as the data, so a chunk read from the wrong place fails too.
func chunkSum(u uploadID, idx uint32, data []byte) uint32 {
	return crc32.Update(chunkSumSeed(u, idx), castagnoli, data)
}

// chunkSumSeed is chunkSum's checksum of the upload id and index, before the
// data.
func chunkSumSeed(u uploadID, idx uint32) uint32 {
	var hdr [len(u) + 4]byte
	copy(hdr[:], u[:])
	binary.BigEndian.PutUint32(hdr[len(u):], idx)
	return crc32.Update(0, castagnoli, hdr[:])
}

// sumPiece is how much copySum copies before it checksums: small enough to
// stay in the core's cache between the two.
const sumPiece = 64 << 10

// copySum copies src into dst (len(dst) >= len(src)) and returns
// chunkSum(u, idx, src), checksumming each piece right after copying it. A
// chunk read from the value log's memory map is in RAM, not in the cache:
// checksumming the copy piece by piece reads RAM once, where a copy and
// then a checksum read it twice (a 1 MiB chunk took half the time in a
// microbenchmark, 115 against 232 µs).
func copySum(dst, src []byte, u uploadID, idx uint32) uint32 {
	c := chunkSumSeed(u, idx)
	for i := 0; i < len(src); i += sumPiece {
		j := min(i+sumPiece, len(src))
		copy(dst[i:j], src[i:j])
		c = crc32.Update(c, castagnoli, dst[i:j])
	}
	return c
}

// metaRecord is the stored form of an entry's metadata.
type metaRecord struct {
	Meta   Meta   `json:"meta"`
	SHA256 string `json:"sha256"`
	// Reason says why a quarantined entry was quarantined.
	Reason string `json:"reason,omitempty"`
	// QuarantinedAt, Cause and Kept describe a quarantine (quarantine.go):
	// when, why ("corrupt", "reports", "admin"), and whether the blob was
	// kept so that the entry can be restored. Records written before these
	// fields existed have none of them (a corrupt-chunk quarantine).
	QuarantinedAt time.Time `json:"quarantined_at,omitzero"`
	Cause         string    `json:"cause,omitempty"`
	Kept          bool      `json:"kept,omitempty"`
}

func encodeMeta(m Meta) ([]byte, error) {
	b, err := json.Marshal(metaRecord{Meta: m, SHA256: hex.EncodeToString(m.SHA256[:])})
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	return b, nil
}

// itemMeta decodes the metadata record item, stored under ref. The value is
// decoded inside Item.Value, so nothing outlives the transaction.
func itemMeta(ref entryRef, item *badger.Item) (Meta, error) {
	var m Meta
	err := item.Value(func(v []byte) error {
		var err error
		m, err = decodeMeta(ref, v)
		return err
	})
	return m, err
}

// decodeMeta decodes an entry's metadata stored under ref.
func decodeMeta(ref entryRef, b []byte) (Meta, error) {
	var rec metaRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return Meta{}, fmt.Errorf("decode metadata of %s/%s: %w", ref.ns, ref.key, err)
	}
	m := rec.Meta
	m.Namespace = ref.ns
	m.Key = ref.key
	sha, err := hex.DecodeString(rec.SHA256)
	if err != nil || len(sha) != 32 {
		return Meta{}, fmt.Errorf("decode metadata of %s/%s: bad sha256 %q", ref.ns, ref.key, rec.SHA256)
	}
	copy(m.SHA256[:], sha)
	return m, nil
}

// blobRecord is the stored form of a blob: where its chunks live.
type blobRecord struct {
	Upload    string `json:"upload"`
	Size      int64  `json:"size"`
	ChunkSize int64  `json:"chunk_size"`
}

func (r blobRecord) uploadID() (uploadID, error) {
	var u uploadID
	b, err := hex.DecodeString(r.Upload)
	if err != nil || len(b) != len(u) {
		return u, fmt.Errorf("decode blob record: bad upload id %q", r.Upload)
	}
	copy(u[:], b)
	return u, nil
}

// chunks returns the number of chunks of the blob.
func (r blobRecord) chunks() uint32 {
	if r.Size == 0 {
		return 0
	}
	return uint32((r.Size + r.ChunkSize - 1) / r.ChunkSize)
}

func encodeBlob(r blobRecord) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode blob record: %w", err)
	}
	return b, nil
}

func decodeBlob(b []byte) (blobRecord, error) {
	var r blobRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decode blob record: %w", err)
	}
	if r.ChunkSize <= 0 || r.Size < 0 {
		return r, fmt.Errorf("decode blob record: bad size %d or chunk size %d", r.Size, r.ChunkSize)
	}
	return r, nil
}
