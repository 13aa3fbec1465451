package store_test

import (
	"testing"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/storetest"
)

func openBadger(t *testing.T, dir string, lim storetest.Limits) store.Store {
	t.Helper()
	s, err := store.Open(store.Config{
		Dir:           dir,
		MaxBytes:      lim.MaxBytes,
		MaxEntryBytes: lim.MaxEntryBytes,
		Logger:        testLogger(t),
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestBadgerConformance(t *testing.T) {
	storetest.Run(t, openBadger)
}
