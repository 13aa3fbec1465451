package statstest

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/stats"
)

// Server is a test server with persisted stats.
type Server struct {
	*apitest.Server
	mu  sync.Mutex
	cur *stats.Stats
}

// Stats returns the stats of the running server.
func (s *Server) Stats() *stats.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Start starts a real server (apitest) whose stats live in <dir>/stats and
// are reopened on every Restart, as `cachesvc serve` does. cfg adjusts the
// stats configuration (Dir and Usage are set by Start); it may be nil.
func Start(t testing.TB, cfg func(*stats.Config)) *Server {
	t.Helper()
	return StartWith(t, cfg, nil)
}

// StartWith is Start with apiCfg, when not nil, adjusting the API
// configuration (e.g. to set a Keyer) after Stats is set.
func StartWith(t testing.TB, cfg func(*stats.Config), apiCfg func(*api.Config)) *Server {
	t.Helper()
	dir := t.TempDir()
	s := &Server{}
	// Registered before apitest.Start, so it runs after the server is shut
	// down.
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cur != nil {
			if err := s.cur.Close(); err != nil {
				t.Errorf("statstest: close stats: %v", err)
			}
		}
	})
	s.Server = apitest.Start(t, apitest.Options{Dir: dir, API: func(c *api.Config) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cur != nil { // a restart: the previous server is already shut down
			if err := s.cur.Close(); err != nil {
				t.Fatalf("statstest: close stats: %v", err)
			}
		}
		store := c.Store
		sc := stats.Config{Dir: filepath.Join(dir, "stats"), Usage: func() stats.Usage { return stats.UsageOf(store.Usage()) }}
		if cfg != nil {
			cfg(&sc)
		}
		st, err := stats.Open(sc)
		if err != nil {
			t.Fatalf("statstest: open stats: %v", err)
		}
		s.cur = st
		c.Stats = st
		if apiCfg != nil {
			apiCfg(c)
		}
	}})
	return s
}
