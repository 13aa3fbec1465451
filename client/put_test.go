package client_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
)

// TestPutSizeOptional: PutOptions are optional, so a zero Size must not
// mean "empty body". It used to send Content-Length 0 and no body, and the
// server stored an empty entry for any reader.
func TestPutSizeOptional(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c, err := client.New(client.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("compiled executable ", 1000)
	tests := []struct {
		name string
		r    io.Reader
		size int64
		want string
	}{
		{"strings.Reader, no size", strings.NewReader(body), 0, body},
		{"bytes.Buffer, no size", bytes.NewBufferString(body), 0, body},
		{"unknown length, no size", io.MultiReader(strings.NewReader(body[:7]), strings.NewReader(body[7:])), 0, body},
		{"unknown length, -1", io.MultiReader(strings.NewReader(body)), -1, body},
		{"declared size", strings.NewReader(body), int64(len(body)), body},
		{"empty reader", strings.NewReader(""), 0, ""},
		{"nil reader", nil, 0, ""},
	}
	ctx := context.Background()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := strings.Repeat(string("0123456789"[i]), 64)
			created, err := c.Put(ctx, "default", key, tt.r, client.PutOptions{Size: tt.size})
			if err != nil || !created {
				t.Fatalf("Put: created %v, err %v", created, err)
			}
			resp, err := c.Get(ctx, "default", key, 0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("stored %d bytes, want %d", len(got), len(tt.want))
			}
		})
	}
}
