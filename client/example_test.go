package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/store"
)

// A compile cache in a few calls: look a key up, compile and store on a
// miss. A key is 64 lowercase hex characters; a server with plugins computes
// it from a signature (Keys, e.g. of JAXKeySignature(jaxKey)), as the
// Python client does. Here the caller derives it itself.
func Example() {
	url, stop := startServer()
	defer stop()

	ctx := context.Background()
	c, err := client.New(client.Config{BaseURL: url, Run: "example-run"})
	if err != nil {
		log.Fatal(err)
	}
	sum := sha256.Sum256([]byte("jit_step, jaxlib 0.10.2, cpu"))
	key := hex.EncodeToString(sum[:])
	for range 2 {
		resp, err := c.Get(ctx, "default", key, 0)
		if client.IsNotFound(err) {
			executable := "the compiled executable's bytes"
			created, err := c.Put(ctx, "default", key, strings.NewReader(executable),
				client.PutOptions{Name: "jit_step", CompileSeconds: 12.5})
			fmt.Println("miss; stored:", created, err)
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("hit: %q %v\n", b, err)
	}

	// Errors from the server are *client.Error with its snake_case code.
	_, err = c.Put(ctx, "default", "jit_step", strings.NewReader("x"), client.PutOptions{})
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code)
	}
	// Output:
	// miss; stored: true <nil>
	// hit: "the compiled executable's bytes" <nil>
	// 400 bad_key
}

// startServer serves a real cachesvc on a free loopback port with a store in
// a temporary directory, as `cachesvc serve` would; stop shuts it down.
func startServer() (url string, stop func()) {
	dir, err := os.MkdirTemp("", "client-example-")
	if err != nil {
		log.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	st, err := store.Open(store.Config{Dir: dir, Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := api.New(api.Config{Store: st, Logger: logger, Registry: prometheus.NewRegistry()})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
		_ = st.Close()
		_ = os.RemoveAll(dir)
	}
}
