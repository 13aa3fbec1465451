package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// checkHeld verifies that accounting, blob records and chunks agree when
// quarantined entries hold blobs: every blob used by a live entry or a
// restorable quarantined one is stored once, with its chunks, and counted.
func checkHeld(t *testing.T, s *Badger) {
	t.Helper()
	ctx := context.Background()
	blobs := map[[32]byte]int64{}
	live := 0
	if err := s.Walk(ctx, "", func(m Meta) bool { blobs[m.SHA256] = m.Size; live++; return true }); err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, ns := range []string{"default", "other"} {
		if err := s.WalkQuarantined(ctx, ns, nil, func(q Quarantined) bool {
			if q.Restorable {
				blobs[q.Meta.SHA256] = q.Meta.Size
				held++
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	var want int64
	for _, n := range blobs {
		want += n
	}
	u := s.Usage()
	if u.Entries != int64(live) || u.Quarantined != int64(held) || u.Blobs != int64(len(blobs)) || u.Bytes != want {
		t.Fatalf("Usage %+v; stored: %d live, %d held, %d blobs, %d bytes", u, live, held, len(blobs), want)
	}
	records, chunks := 0, 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixBlob), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			records++
			if err := it.Item().Value(func(v []byte) error {
				rec, err := decodeBlob(v)
				if rec.Size >= int64(s.cfg.ChunkSize) {
					chunks += int(rec.chunks())
				} else if rec.Size > 0 {
					chunks++ // the inline chunk
				}
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if records != len(blobs) {
		t.Fatalf("%d blob records for %d blobs in use", records, len(blobs))
	}
	if got := countChunks(t, s); got != chunks {
		t.Fatalf("%d chunks stored, blobs name %d", got, chunks)
	}
}

type reportStep struct {
	who   string
	admin bool
}

func TestReportThreshold(t *testing.T) {
	tests := []struct {
		name      string
		threshold int
		steps     []reportStep
		// want after each step: quarantined?
		want         []bool
		wantTotal    int64
		wantDistinct int
		wantCause    string
	}{
		{"one reporter twice", 2, []reportStep{{"a", false}, {"a", false}}, []bool{false, false}, 2, 1, ""},
		{"two reporters", 2, []reportStep{{"a", false}, {"a", false}, {"b", false}}, []bool{false, false, true}, 3, 2, CauseReports},
		{"admin at once", 2, []reportStep{{"root", true}}, []bool{true}, 1, 1, CauseAdmin},
		{"threshold one", 1, []reportStep{{"a", false}}, []bool{true}, 1, 1, CauseReports},
		{"report after quarantine changes nothing", 1, []reportStep{{"a", false}, {"b", false}}, []bool{true, true}, 1, 1, CauseReports},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := openInternal(t, Config{Dir: t.TempDir()})
			defer s.Close()
			key, other := keyOf("reported"), keyOf("untouched")
			data := pattern(1, 2*mib+10)
			mustPut(t, s, "default", key, data)
			mustPut(t, s, "default", other, pattern(2, 100))
			var st ReportState
			for i, step := range tc.steps {
				var err error
				st, err = s.Report(ctx, "default", key, Report{Reason: "deserialize failed", Reporter: step.who}, tc.threshold, step.admin)
				if err != nil {
					t.Fatalf("report %d: %v", i, err)
				}
				if st.Quarantined != tc.want[i] {
					t.Fatalf("after report %d: quarantined %v, want %v", i, st.Quarantined, tc.want[i])
				}
			}
			if st.Total != tc.wantTotal || st.Distinct != tc.wantDistinct || st.Cause != tc.wantCause {
				t.Fatalf("state %+v, want total %d, distinct %d, cause %q", st, tc.wantTotal, tc.wantDistinct, tc.wantCause)
			}
			quarantined := tc.want[len(tc.want)-1]
			_, getErr := readAll(s, "default", key, 0)
			_, statErr := s.Stat(ctx, "default", key)
			if quarantined != errors.Is(getErr, ErrNotFound) || quarantined != errors.Is(statErr, ErrNotFound) {
				t.Fatalf("quarantined %v: Get %v, Stat %v", quarantined, getErr, statErr)
			}
			if got, err := readAll(s, "default", other, 0); err != nil || len(got) != 100 {
				t.Fatalf("unrelated entry: %d bytes, %v", len(got), err)
			}
			walked := 0
			_ = s.Walk(ctx, "default", func(Meta) bool { walked++; return true })
			if want := map[bool]int{true: 1, false: 2}[quarantined]; walked != want {
				t.Fatalf("Walk saw %d entries, want %d", walked, want)
			}
			if st.Quarantined && (!st.Restorable || st.Reason != "deserialize failed") {
				t.Fatalf("state %+v: want restorable with the report's reason", st)
			}
			checkHeld(t, s)
		})
	}
}

func TestQuarantineEnds(t *testing.T) {
	big := pattern(3, 3*mib+100)  // chunked
	small := pattern(4, 4<<10)    // one inline chunk
	newer := pattern(5, 2*mib+99) // what a writer recompiled
	tests := []struct {
		name string
		data []byte
		// end acts on the quarantined entry (s may be reopened and returned);
		// it returns the bytes Get should serve after it (nil: a miss) and
		// whether the entry should still be listed.
		end func(t *testing.T, s *Badger, dir string) (*Badger, []byte, bool)
	}{
		{"restore", big, func(t *testing.T, s *Badger, _ string) (*Badger, []byte, bool) {
			if _, err := s.Restore(context.Background(), "default", keyOf("q")); err != nil {
				t.Fatal(err)
			}
			return s, big, false
		}},
		{"restore small", small, func(t *testing.T, s *Badger, _ string) (*Badger, []byte, bool) {
			if _, err := s.Restore(context.Background(), "default", keyOf("q")); err != nil {
				t.Fatal(err)
			}
			return s, small, false
		}},
		{"put same bytes", big, func(t *testing.T, s *Badger, _ string) (*Badger, []byte, bool) {
			_, err := s.Put(context.Background(), "default", keyOf("q"), bytes.NewReader(big), PutOptions{Size: int64(len(big))})
			if !errors.Is(err, ErrQuarantined) {
				t.Fatalf("Put of the quarantined bytes: %v, want ErrQuarantined", err)
			}
			return s, nil, true
		}},
		{"put different bytes", big, func(t *testing.T, s *Badger, _ string) (*Badger, []byte, bool) {
			res, err := s.Put(context.Background(), "default", keyOf("q"), bytes.NewReader(newer), PutOptions{Size: -1})
			if err != nil || !res.Created {
				t.Fatalf("Put of new bytes: %+v, %v", res, err)
			}
			return s, newer, false
		}},
		{"put different small bytes", small, func(t *testing.T, s *Badger, _ string) (*Badger, []byte, bool) {
			mustPut(t, s, "default", keyOf("q"), small[:100])
			return s, small[:100], false
		}},
		{"delete", big, func(t *testing.T, s *Badger, _ string) (*Badger, []byte, bool) {
			if err := s.Delete(context.Background(), "default", keyOf("q")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Restore(context.Background(), "default", keyOf("q")); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Restore after Delete: %v, want ErrNotFound", err)
			}
			return s, nil, false
		}},
		{"reopen then restore", big, func(t *testing.T, s *Badger, dir string) (*Badger, []byte, bool) {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openInternal(t, Config{Dir: dir})
			if !s.IsQuarantined("default", keyOf("q")) {
				t.Fatal("not quarantined after reopening")
			}
			checkHeld(t, s)
			if _, err := s.Restore(context.Background(), "default", keyOf("q")); err != nil {
				t.Fatal(err)
			}
			return s, big, false
		}},
		{"reopen stays quarantined", big, func(t *testing.T, s *Badger, dir string) (*Badger, []byte, bool) {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return openInternal(t, Config{Dir: dir}), nil, true
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			s := openInternal(t, Config{Dir: dir})
			defer func() { s.Close() }()
			key := keyOf("q")
			mustPut(t, s, "default", key, tc.data)
			mustPut(t, s, "other", keyOf("shares"), tc.data) // same blob, another entry
			if _, err := s.Quarantine(ctx, "default", key, "bad bytes"); err != nil {
				t.Fatal(err)
			}
			// The entry sharing the blob is untouched, and deleting it
			// leaves the quarantined entry's bytes in place.
			if got, err := readAll(s, "other", keyOf("shares"), 0); err != nil || !bytes.Equal(got, tc.data) {
				t.Fatalf("entry sharing the blob: %d bytes, %v", len(got), err)
			}
			if err := s.Delete(ctx, "other", keyOf("shares")); err != nil {
				t.Fatal(err)
			}
			checkHeld(t, s)

			var want []byte
			var listed bool
			s, want, listed = tc.end(t, s, dir)
			got, err := readAll(s, "default", key, 0)
			switch {
			case want == nil && !errors.Is(err, ErrNotFound):
				t.Fatalf("Get = %d bytes, %v; want a miss", len(got), err)
			case want != nil && (err != nil || !bytes.Equal(got, want)):
				t.Fatalf("Get = %d bytes, %v; want %d bytes", len(got), err, len(want))
			}
			n := 0
			if err := s.WalkQuarantined(ctx, "default", nil, func(Quarantined) bool { n++; return true }); err != nil {
				t.Fatal(err)
			}
			if (n == 1) != listed {
				t.Fatalf("listed %d quarantined entries, want listed=%v", n, listed)
			}
			if st, err := s.Reports(ctx, "default", key); err == nil && !listed && st.Total != 0 {
				t.Fatalf("reports survive the end of the quarantine: %+v", st)
			}
			checkHeld(t, s)
		})
	}
}

func TestCorruptChunkOfQuarantinedBlob(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Config{Dir: t.TempDir()})
	defer s.Close()
	data := pattern(6, 3*mib)
	mustPut(t, s, "default", keyOf("q"), data)
	mustPut(t, s, "default", keyOf("live"), data)
	_, u := blobOf(t, s, "default", keyOf("live"))
	if _, err := s.Quarantine(ctx, "default", keyOf("q"), "bad"); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(chunkKey(u, 1)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(s, "default", keyOf("live"), 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read through the missing chunk: %v, want ErrCorrupt", err)
	}
	st, err := s.Reports(ctx, "default", keyOf("q"))
	if err != nil || !st.Quarantined || st.Restorable {
		t.Fatalf("quarantined entry after its blob was lost: %+v, %v; want listed, not restorable", st, err)
	}
	if _, err := s.Restore(ctx, "default", keyOf("q")); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "without its bytes") {
		t.Fatalf("Restore = %v, want ErrNotFound saying the bytes are gone", err)
	}
	checkHeld(t, s)
}

func TestQuarantinedEvictedLast(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Config{Dir: t.TempDir(), MaxBytes: 3 * mib})
	defer s.Close()
	put := func(name string, seed byte, n int) { mustPut(t, s, "default", keyOf(name), pattern(seed, n)) }
	put("q", 1, mib)
	if _, err := s.Quarantine(ctx, "default", keyOf("q"), "bad"); err != nil {
		t.Fatal(err)
	}
	put("b", 2, mib)
	put("c", 3, mib)
	put("d", 4, mib)   // evicts b
	put("e", 5, 2*mib) // evicts c and d, not q
	if !s.IsQuarantined("default", keyOf("q")) {
		t.Fatal("a quarantined entry was evicted while live entries were left")
	}
	checkHeld(t, s)
	put("f", 6, 3*mib) // needs everything: e, then q
	if s.IsQuarantined("default", keyOf("q")) {
		t.Fatal("quarantined entry kept although the store needed its bytes")
	}
	if got := s.Usage(); got.Entries != 1 || got.Quarantined != 0 || got.Bytes != 3*mib {
		t.Fatalf("Usage %+v, want only f", got)
	}
	checkHeld(t, s)
}

func TestReportErrorsAndBounds(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Config{Dir: t.TempDir()})
	defer s.Close()
	key := keyOf("x")
	mustPut(t, s, "default", key, pattern(1, 100))
	ok := Report{Reason: "r", Reporter: "a"}
	tests := []struct {
		name      string
		key       Key
		r         Report
		threshold int
		want      error
	}{
		{"threshold zero", key, ok, 0, ErrInvalid},
		{"threshold over the bound", key, ok, MaxReporters + 1, ErrInvalid},
		{"no reason", key, Report{Reporter: "a"}, 2, ErrInvalid},
		{"reason too long", key, Report{Reason: strings.Repeat("x", MaxReasonLen+1), Reporter: "a"}, 2, ErrInvalid},
		{"no reporter", key, Report{Reason: "r"}, 2, ErrInvalid},
		{"no such entry", keyOf("absent"), ok, 2, ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Report(ctx, "default", tc.key, tc.r, tc.threshold, false); !errors.Is(err, tc.want) {
				t.Fatalf("Report = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := s.Quarantine(ctx, "default", keyOf("absent"), "r"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Quarantine of a miss = %v", err)
	}
	if _, err := s.Restore(ctx, "default", key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Restore of a live entry = %v", err)
	}
	if st, _ := s.Reports(ctx, "default", key); st.Total != 0 {
		t.Fatalf("rejected reports were recorded: %+v", st)
	}

	// Bounds: the last MaxReports reports, at most MaxReporters distinct.
	var st ReportState
	for i := 0; i < MaxReporters-1; i++ {
		var err error
		st, err = s.Report(ctx, "default", key, Report{Reason: fmt.Sprintf("r%d", i), Reporter: fmt.Sprintf("c%d", i)}, MaxReporters, false)
		if err != nil || st.Quarantined {
			t.Fatalf("report %d: %+v, %v", i, st, err)
		}
	}
	if len(st.Reports) != MaxReports || st.Reports[MaxReports-1].Reason != fmt.Sprintf("r%d", MaxReporters-2) || st.Distinct != MaxReporters-1 {
		t.Fatalf("kept %d reports (last %q), %d distinct", len(st.Reports), st.Reports[len(st.Reports)-1].Reason, st.Distinct)
	}
	st, err := s.Report(ctx, "default", key, Report{Reason: "last", Reporter: "c-last"}, MaxReporters, false)
	if err != nil || !st.Quarantined || st.Distinct != MaxReporters {
		t.Fatalf("report %d: %+v, %v; want quarantined", MaxReporters, st, err)
	}
}

func TestWalkQuarantinedPages(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Config{Dir: t.TempDir()})
	defer s.Close()
	const n = walkPage + 44
	var keys []Key
	for i := 0; i < n; i++ {
		k := keyOf(fmt.Sprint("k", i))
		mustPut(t, s, "default", k, []byte(fmt.Sprint("v", i)))
		if _, err := s.Quarantine(ctx, "default", k, "bad"); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	mustPut(t, s, "other", keyOf("o"), []byte("o"))
	if _, err := s.Quarantine(ctx, "other", keyOf("o"), "bad"); err != nil {
		t.Fatal(err)
	}
	var all []Key
	if err := s.WalkQuarantined(ctx, "default", nil, func(q Quarantined) bool { all = append(all, q.Meta.Key); return true }); err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("listed %d, want %d (and nothing of namespace other)", len(all), n)
	}
	for i := 1; i < len(all); i++ {
		if bytes.Compare(all[i-1][:], all[i][:]) >= 0 {
			t.Fatalf("not in key order at %d", i)
		}
	}
	var rest []Key
	after := all[99]
	if err := s.WalkQuarantined(ctx, "default", &after, func(q Quarantined) bool { rest = append(rest, q.Meta.Key); return true }); err != nil {
		t.Fatal(err)
	}
	if len(rest) != n-100 || rest[0] != all[100] {
		t.Fatalf("after the 100th: %d entries starting %s, want %d starting %s", len(rest), rest[0], n-100, all[100])
	}
}
