package store

import "testing"

// TestReaderHolds: a purge of a held upload waits for the last reader's
// release; one of an upload no reader holds runs at once.
func TestReaderHolds(t *testing.T) {
	var h readerHolds
	a, b := uploadID{1}, uploadID{2}
	h.hold(a)
	h.hold(a)
	steps := []struct {
		name      string
		do        func() (deferredPurge, bool)
		wantPurge bool
		want      deferredPurge
	}{
		{"purge of an unheld upload runs", func() (deferredPurge, bool) { return deferredPurge{}, !h.deferPurge(b, 1, 10) }, true, deferredPurge{}},
		{"purge of a held upload waits", func() (deferredPurge, bool) { return deferredPurge{}, h.deferPurge(a, 3, 30) }, true, deferredPurge{}},
		{"first release keeps it", func() (deferredPurge, bool) { return h.release(a) }, false, deferredPurge{}},
		{"last release returns it", func() (deferredPurge, bool) { return h.release(a) }, true, deferredPurge{n: 3, size: 30}},
		{"then nothing is held", func() (deferredPurge, bool) { return deferredPurge{}, !h.deferPurge(a, 3, 30) }, true, deferredPurge{}},
	}
	for _, st := range steps {
		got, ok := st.do()
		if ok != st.wantPurge || got != st.want {
			t.Errorf("%s: %+v, %v; want %+v, %v", st.name, got, ok, st.want, st.wantPurge)
		}
	}
	if len(h.held) != 0 || len(h.deferred) != 0 {
		t.Errorf("left %v held, %v deferred", h.held, h.deferred)
	}
}
