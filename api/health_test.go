package api_test

import (
	"net/http/httptest"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/store"
)

// TestReadyz checks /readyz is 200 while the store is open and 503
// not_ready once it is closed, while /healthz stays 200.
func TestReadyz(t *testing.T) {
	st, err := store.Open(store.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) int {
		resp, err := srv.App().Test(httptest.NewRequest("GET", path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/readyz"); got != 200 {
		t.Errorf("/readyz with the store open = %d, want 200", got)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if got := get("/readyz"); got != 503 {
		t.Errorf("/readyz with the store closed = %d, want 503", got)
	}
	if got := get("/healthz"); got != 200 {
		t.Errorf("/healthz = %d, want 200", got)
	}
}
