package store

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

const crashDirEnv = "CACHESVC_STORE_CRASH_DIR"

// crashSyncEnv set to 1 makes the crash child open its store with SyncWrites.
const crashSyncEnv = "CACHESVC_STORE_CRASH_SYNC"

// crashData is the body of upload i of worker w.
func crashData(w, i int) []byte {
	sizes := []int{0, 1, 4 << 10, 300 << 10, mib, mib + 7, 2*mib + 513}
	return pattern(byte(w*31+i), sizes[(w+i)%len(sizes)])
}

func crashKey(w, i int) Key { return keyOf(fmt.Sprintf("crash-%d-%d", w, i)) }

// slowReader hands out its data in small pieces with pauses, so that a kill
// lands while uploads are mid-stream.
type slowReader struct{ r io.Reader }

func (s *slowReader) Read(p []byte) (int, error) {
	if len(p) > 64<<10 {
		p = p[:64<<10]
	}
	time.Sleep(200 * time.Microsecond)
	return s.r.Read(p)
}

// crashChild uploads forever from 8 workers, printing "ACK w i" after each
// acknowledged Put. The parent kills it with SIGKILL.
func crashChild(dir string) {
	s, err := Open(Config{Dir: dir, SyncWrites: os.Getenv(crashSyncEnv) == "1", Logger: quietLogger(nil)})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	for w := 0; w < 8; w++ {
		go func() {
			for i := 0; ; i++ {
				data := crashData(w, i)
				_, err := s.Put(context.Background(), "default", crashKey(w, i), &slowReader{bytes.NewReader(data)}, PutOptions{Size: int64(len(data))})
				mu.Lock()
				if err != nil {
					fmt.Fprintln(out, "ERR", err)
				} else {
					fmt.Fprintln(out, "ACK", w, i)
				}
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	select {}
}

func TestCrashRecovery(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	for _, tc := range []struct {
		name string
		sync string // crashSyncEnv
	}{{"default", "0"}, {"sync writes", "1"}} {
		t.Run(tc.name, func(t *testing.T) { crashAndCheck(t, tc.sync) })
	}
}

// crashAndCheck kills a child writing concurrently with kill -9 and checks
// the store it leaves: every acknowledged upload intact, nothing partial.
func crashAndCheck(t *testing.T, sync string) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashRecovery$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashSyncEnv+"="+sync)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[[2]int]bool{}
	sc := bufio.NewScanner(stdout)
	deadline := time.Now().Add(60 * time.Second)
	for len(acked) < 40 && time.Now().Before(deadline) && sc.Scan() {
		line := sc.Text()
		var w, i int
		if _, err := fmt.Sscanf(line, "ACK %d %d", &w, &i); err == nil {
			acked[[2]int{w, i}] = true
		} else if strings.HasPrefix(line, "ERR") {
			t.Errorf("child: %s", line)
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	// Acks printed before the kill took effect count too.
	for sc.Scan() {
		var w, i int
		if _, err := fmt.Sscanf(sc.Text(), "ACK %d %d", &w, &i); err == nil {
			acked[[2]int{w, i}] = true
		}
	}
	cmd.Wait()
	if len(acked) == 0 {
		t.Fatal("no upload was acknowledged before the kill")
	}

	s := openInternal(t, Config{Dir: dir})
	defer s.Close()
	t.Logf("%d uploads acknowledged before SIGKILL; %d orphan chunks collected on open", len(acked), s.orphanChunks)
	for wi := range acked {
		got, err := readAll(s, "default", crashKey(wi[0], wi[1]), 0)
		if err != nil || !bytes.Equal(got, crashData(wi[0], wi[1])) {
			t.Fatalf("acknowledged upload %v: %d bytes, %v", wi, len(got), err)
		}
	}
	var metas []Meta
	if err := s.Walk(context.Background(), "", func(m Meta) bool { metas = append(metas, m); return true }); err != nil {
		t.Fatal(err)
	}
	for _, m := range metas {
		got, err := readAll(s, m.Namespace, m.Key, 0)
		if err != nil || int64(len(got)) != m.Size || sha256.Sum256(got) != m.SHA256 {
			t.Fatalf("visible entry %s: %d bytes, %v; bytes must match its sha256", m.Key, len(got), err)
		}
	}
	if u := s.Usage(); u.Entries != int64(len(metas)) || u.IntegrityFailures != 0 {
		t.Fatalf("Usage = %+v with %d visible entries", u, len(metas))
	}
	// Every chunk left belongs to a visible blob.
	want := 0
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixBlob), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := it.Item().Value(func(v []byte) error {
				rec, err := decodeBlob(v)
				want += int(rec.chunks())
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := countChunks(t, s); got != want {
		t.Fatalf("%d chunks in the database, but the blobs name %d", got, want)
	}
}
