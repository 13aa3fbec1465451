package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
)

// TestErrorNamesRequestID: an error answer's X-Request-Id reaches the
// caller as Error.RequestID and in its text, so a user can quote it to the
// operator, who finds the server's log line by it.
func TestErrorNamesRequestID(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c, err := client.New(client.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	missing := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name string
		call func() error
		code string
	}{
		{"GET miss", func() error {
			resp, err := c.Get(context.Background(), "default", missing, 0)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}, "not_found"},
		{"bad namespace", func() error {
			_, _, err := c.Exists(context.Background(), "Bad_NS", []string{missing})
			return err
		}, "bad_namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *client.Error
			if err := tc.call(); !errors.As(err, &e) || e.Code != tc.code {
				t.Fatalf("err = %v, want a *client.Error %s", err, tc.code)
			}
			if e.RequestID == "" || !strings.Contains(e.Error(), "request id "+e.RequestID) {
				t.Errorf("Error{RequestID: %q}.Error() = %q, want it to name the request id", e.RequestID, e.Error())
			}
		})
	}
}
