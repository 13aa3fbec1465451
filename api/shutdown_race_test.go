package api_test

import (
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestCloseRightAfterStart shuts a server down before its Serve goroutine
// may have started: Close must not hang.
func TestCloseRightAfterStart(t *testing.T) {
	for i := 0; i < 50; i++ {
		srv := apitest.Start(t, apitest.Options{})
		srv.Close()
	}
}
