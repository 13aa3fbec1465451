package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"

	"github.com/cachesvc/cachesvc/store"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "cachesvc-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(store.Config{Dir: dir, MaxBytes: 1 << 30, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	key := store.Key(sha256.Sum256([]byte("my program")))
	body := "compiled executable bytes"
	sum := sha256.Sum256([]byte(body))
	res, err := s.Put(ctx, store.DefaultNamespace, key, strings.NewReader(body),
		store.PutOptions{Size: int64(len(body)), SHA256: &sum, Backend: "xla"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created:", res.Created)

	// Storing the same bytes again is a no-op; other bytes are a conflict.
	res, _ = s.Put(ctx, store.DefaultNamespace, key, strings.NewReader(body), store.PutOptions{Size: -1})
	fmt.Println("created again:", res.Created)
	_, err = s.Put(ctx, store.DefaultNamespace, key, strings.NewReader("other bytes"), store.PutOptions{Size: -1})
	fmt.Println("conflict:", errors.Is(err, store.ErrConflict))

	// Read bytes 9 to 18.
	m, rc, err := s.Get(ctx, store.DefaultNamespace, key, 9, 10)
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q of %d bytes, hits %d\n", b, m.Size, m.Hits)
	// Output:
	// created: true
	// created again: false
	// conflict: true
	// "executable" of 25 bytes, hits 1
}
