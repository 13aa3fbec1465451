package api

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// FuzzBatchTar checks the batch stream's tar framing: for any entry
// metadata and content, memberHeader either fails cleanly or yields blocks
// exactly as long as memberHeaderLen planned
// that archive/tar reads back with the same name, size, content and PAX
// records, and tarTail ends the archive with a missing.json that decodes
// to the keys it was given.
func FuzzBatchTar(f *testing.F) {
	f.Add("jit_f", "xla", 1.5, []byte("executable"), "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", int64(0), true)
	f.Add("", "", 0.0, []byte{}, "", int64(1700000000), false)
	f.Add("naïve\x00name", "b\xffad", math.Inf(1), bytes.Repeat([]byte{0}, 513), "zz", int64(-1), true)
	signer := auth.NewSigner(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	f.Fuzz(func(t *testing.T, name, backend string, secs float64, content []byte, missingKey string, created int64, signed bool) {
		key := cachekey.Key(sha256.Sum256([]byte(name)))
		m := store.Meta{
			Key: key, Size: int64(len(content)), SHA256: sha256.Sum256(content),
			Name: name, Backend: backend, CompileSeconds: secs,
			Created: time.Unix(created%(1<<34), 0),
		}
		sig := ""
		if signed {
			sig = signer.Sign(key, m.SHA256)
		}
		hdr, err := memberHeader(key, m, sig)
		if err != nil {
			return // the handler turns this into an error response
		}
		// The planned length (Content-Length) must match what is written.
		if n, err := memberHeaderLen(key, m, sig); err != nil || n != len(hdr) {
			t.Fatalf("memberHeaderLen = %d, %v; memberHeader wrote %d bytes", n, err, len(hdr))
		}
		var archive bytes.Buffer
		archive.Write(hdr)
		archive.Write(content)
		archive.Write(make([]byte, tarPad(m.Size)))
		if archive.Len()%512 != 0 {
			t.Fatalf("member is %d bytes, not whole blocks", archive.Len())
		}
		tail, err := tarTail(wire.MissingList{Missing: []string{missingKey}})
		if err != nil {
			t.Fatalf("tarTail: %v", err)
		}
		archive.Write(tail)

		tr := tar.NewReader(&archive)
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("read member header: %v", err)
		}
		if h.Name != key.String() || h.Size != m.Size {
			t.Fatalf("member %q size %d, want %s size %d", h.Name, h.Size, key, m.Size)
		}
		got, err := io.ReadAll(tr)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("member content differs (err %v)", err)
		}
		want := map[string]string{
			wire.PAXSHA256:         hex.EncodeToString(m.SHA256[:]),
			wire.PAXCompileSeconds: strconv.FormatFloat(secs, 'f', -1, 64),
		}
		if name != "" && utf8.ValidString(name) {
			want[wire.PAXName] = name
		}
		if backend != "" && utf8.ValidString(backend) {
			want[wire.PAXBackend] = backend
		}
		if signed {
			want[wire.PAXSignature] = sig
		}
		for k, v := range want {
			if h.PAXRecords[k] != v {
				t.Fatalf("PAX %s = %q, want %q", k, h.PAXRecords[k], v)
			}
		}
		h, err = tr.Next()
		if err != nil || h.Name != wire.MissingMember {
			t.Fatalf("second member: %v %v", h, err)
		}
		var ml wire.MissingList
		if err := json.NewDecoder(tr).Decode(&ml); err != nil {
			t.Fatalf("decode missing.json: %v", err)
		}
		if len(ml.Missing) != 1 || (utf8.ValidString(missingKey) && ml.Missing[0] != missingKey) {
			t.Fatalf("missing.json = %v, want [%q]", ml.Missing, missingKey)
		}
		if _, err := tr.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("after missing.json: %v, want EOF", err)
		}
	})
}
