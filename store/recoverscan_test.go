package store

import (
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"
)

// TestDecodeAcctMeta checks that the hand scan of a metadata record agrees
// with encoding/json on records the store writes and on unusual ones, and
// that bad records fail as before.
func TestDecodeAcctMeta(t *testing.T) {
	ref := entryRef{"default", keyOf("a")}
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 891, time.UTC)
	full := Meta{Namespace: "default", Size: 12, SHA256: [32]byte{1, 2, 3}, Created: t0, LastAccess: t0.Add(time.Hour), Hits: 3,
		Backend: "xla", Name: `a "quoted" \\ name`, Labels: map[string]string{"sha256": "x", "created": "y"}, Components: map[string]string{"k": "v"}}
	written, err := encodeMeta(full)
	if err != nil {
		t.Fatal(err)
	}
	never := full
	never.LastAccess = time.Time{}
	neverB, _ := encodeMeta(never)
	quarantined, _ := json.Marshal(metaRecord{Meta: full, SHA256: hex.EncodeToString(full.SHA256[:]), Reason: "bad", Cause: CauseAdmin, Kept: true})
	tests := []struct {
		name      string
		rec       string
		wantSHA   [32]byte
		wantAtime time.Time
		wantErr   bool
		scanned   bool // read by the hand scan, not the fallback
	}{
		{"as written", string(written), full.SHA256, full.LastAccess, false, true},
		{"never accessed: created", string(neverB), full.SHA256, t0, false, true},
		{"quarantine record", string(quarantined), full.SHA256, full.LastAccess, false, true},
		{"spaces and escapes (json fallback)", ` { "meta" : { "last_access" : "2026-03-04T06:06:07Z" , "n\u0061me":"x" } , "sha256" : "0102030000000000000000000000000000000000000000000000000000000000" } `,
			full.SHA256, time.Date(2026, 3, 4, 6, 6, 7, 0, time.UTC), false, false},
		{"not json", "{not json", [32]byte{}, time.Time{}, true, false},
		{"trailing bytes", string(written) + "x", [32]byte{}, time.Time{}, true, false},
		{"short digest", `{"meta":{},"sha256":"0102"}`, [32]byte{}, time.Time{}, true, true},
		{"bad time", `{"meta":{"last_access":"yesterday"},"sha256":"0102030000000000000000000000000000000000000000000000000000000000"}`, [32]byte{}, time.Time{}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := scanAcctMeta([]byte(tc.rec), &acctMetaRecord{}); got != tc.scanned {
				t.Fatalf("scanAcctMeta = %v, want %v", got, tc.scanned)
			}
			sha, atime, err := decodeAcctMeta(ref, []byte(tc.rec))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if sha != tc.wantSHA || !atime.Equal(tc.wantAtime) {
				t.Fatalf("got %x at %v, want %x at %v", sha, atime, tc.wantSHA, tc.wantAtime)
			}
			m, err := decodeMeta(ref, []byte(tc.rec))
			if err != nil || m.SHA256 != sha {
				t.Fatalf("decodeMeta disagrees: %x, %v", m.SHA256, err)
			}
		})
	}
}

// TestDecodeBlobScan checks the hand scan of blob records against
// decodeBlob.
func TestDecodeBlobScan(t *testing.T) {
	written, err := encodeBlob(blobRecord{Upload: "00112233445566778899aabbccddeeff", Size: 5 << 30, ChunkSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		rec     string
		wantErr bool
	}{
		{"as written", string(written), false},
		{"empty blob", `{"upload":"00","size":0,"chunk_size":1}`, false},
		{"no chunk size", `{"upload":"00","size":0,"chunk_size":0}`, true},
		{"unknown field and spaces", ` {"size": 7, "extra": [1, {"a": "b\"c"}], "upload": "ab", "chunk_size": 4} `, false},
		{"float size (fallback refuses)", `{"upload":"ab","size":1.5,"chunk_size":4}`, true},
		{"not json", `{"upload":`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeBlobScan([]byte(tc.rec))
			want, wantErr := decodeBlob([]byte(tc.rec))
			if (err != nil) != tc.wantErr || (wantErr != nil) != tc.wantErr {
				t.Fatalf("err = %v, decodeBlob's = %v, want error %v", err, wantErr, tc.wantErr)
			}
			if got != want {
				t.Fatalf("got %+v, decodeBlob gives %+v", got, want)
			}
		})
	}
}

// TestFoundBlobsFind checks the radix-indexed search against every member
// and some absent digests, for evenly spread digests and for digests
// bunched at one end (one bucket holds them all), and for tiny lists.
func TestFoundBlobsFind(t *testing.T) {
	tests := []struct {
		name  string
		digit func(i int) [32]byte
	}{
		{"spread", func(i int) [32]byte { return benchDigest(i, 'b') }},
		{"bunched", func(i int) [32]byte { d := benchDigest(i, 'b'); d[0], d[1] = 0xff, 0xff; return d }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 2, 5000} {
				testFoundBlobs(t, tc.digit, n)
			}
		})
	}
}

func testFoundBlobs(t *testing.T, digit func(int) [32]byte, n int) {
	t.Helper()
	var f foundBlobs
	for i := range n {
		f.list = append(f.list, foundBlob{sha: digit(i), size: int64(i)})
	}
	f.sort()
	for i := range n {
		if size, ok := f.use(digit(i)); !ok || size != int64(i) {
			t.Fatalf("%d blobs: use(digest %d) = %d, %v", n, i, size, ok)
		}
	}
	for i := n; i < n+1000; i++ {
		if _, ok := f.find(digit(i)); ok {
			t.Fatalf("%d blobs: find(absent digest %d) found it", n, i)
		}
	}
	for _, b := range f.list {
		if !b.used {
			t.Fatalf("%d blobs: blob %x not marked used", n, b.sha[:4])
		}
	}
}
