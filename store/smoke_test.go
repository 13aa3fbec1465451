package store

import (
	"bytes"
	"context"
	"io"
	"testing"
)

func TestSmoke(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := bytes.Repeat([]byte("abc"), 1<<20)
	var k Key
	k[0] = 1
	res, err := s.Put(ctx, "default", k, bytes.NewReader(data), PutOptions{Size: -1})
	if err != nil || !res.Created {
		t.Fatal(res, err)
	}
	m, rc, err := s.Get(ctx, "default", k, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) || m.Size != int64(len(data)) {
		t.Fatal(err, len(got))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
