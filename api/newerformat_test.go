package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/store"
)

// TestNewerFormatIsUnavailable: a shared-tier record written by a newer
// replica (store.ErrNewerFormat) answers 503 shared_tier_unavailable with
// the store's words (upgrade this replica), not 500 internal_error: the
// client compiles or retries, and nothing looks broken that an upgrade
// fixes.
func TestNewerFormatIsUnavailable(t *testing.T) {
	err := fmt.Errorf("get entry default/k: entry record default/k is of version 3, written by a newer cachesvc; upgrade this replica: %w", store.ErrNewerFormat)
	e := toError(err)
	if e == nil || e.Status != http.StatusServiceUnavailable || e.Code != "shared_tier_unavailable" {
		t.Fatalf("toError = %+v, want 503 shared_tier_unavailable", e)
	}
	if !strings.Contains(e.Message, "upgrade this replica") {
		t.Errorf("message %q does not say to upgrade the replica", e.Message)
	}
}
