package jaxsync_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/jaxcache"
	"github.com/cachesvc/cachesvc/jaxcache/jaxsync"
)

func newAgent(t *testing.T, url, run string, dir *jaxcache.Dir) *jaxsync.Agent {
	t.Helper()
	cl, err := client.New(client.Config{BaseURL: url, Run: run})
	if err != nil {
		t.Fatal(err)
	}
	a, err := jaxsync.NewAgent(jaxsync.AgentConfig{Client: cl, Namespace: "default", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func poll(t *testing.T, a *jaxsync.Agent) jaxsync.AgentStats {
	t.Helper()
	st, err := a.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestAgentUploadsOnlyCompleteFiles writes files the way JAX does (in place,
// no -atime) and checks that the agent uploads each once it is whole and
// stable, never a file still being written, and nothing twice across a
// restart.
func TestAgentUploadsOnlyCompleteFiles(t *testing.T) {
	srv := startServer(t)
	dir, err := jaxcache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	full := jaxValue(3, string(make([]byte, 50_000)))
	a := newAgent(t, srv.URL, "arm-a", dir)
	os.WriteFile(dir.CachePath(jaxKey(1)), full, 0o644)
	os.WriteFile(dir.CachePath(jaxKey(2)), full[:len(full)/2], 0o644) // still being written

	if st := poll(t, a); st.Uploaded != 0 || st.Pending != 2 {
		t.Fatalf("first sighting: %+v, want nothing uploaded", st)
	}
	if st := poll(t, a); st.Uploaded != 1 || st.Pending != 1 {
		t.Fatalf("second poll: %+v, want the complete file uploaded, the partial one pending", st)
	}
	// The writer finishes the second file.
	os.WriteFile(dir.CachePath(jaxKey(2)), full, 0o644)
	os.Chtimes(dir.CachePath(jaxKey(2)), timeNowPlus(1), timeNowPlus(1))
	poll(t, a)
	if st := poll(t, a); st.Uploaded != 1 {
		t.Fatalf("after completion: %+v, want 1 upload", st)
	}

	// Stored under the passthrough key with the JAX key as the name.
	cl, _ := client.New(client.Config{BaseURL: srv.URL})
	for _, i := range []int{1, 2} {
		kr, err := cl.Keys(context.Background(), "default", client.JAXKeySignature(jaxKey(i)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cl.Get(context.Background(), "default", kr.Key, 0)
		if err != nil {
			t.Fatalf("entry %d not stored: %v", i, err)
		}
		resp.Body.Close()
		if resp.Header.Get("X-Cachesvc-Name") != jaxKey(i) || resp.Header.Get("X-Compile-Seconds") != "3" {
			t.Errorf("entry %d headers: %v", i, resp.Header)
		}
	}
	m, err := cl.Manifest(context.Background(), "default", "arm-a")
	if err != nil || len(m.Keys) != 2 || !m.Keys[0].Written || m.Keys[0].Name != jaxKey(1) {
		t.Fatalf("manifest: %+v %v", m, err)
	}

	// A restarted agent remembers what it uploaded.
	a2 := newAgent(t, srv.URL, "arm-a", dir)
	if a2.Uploaded() != 2 {
		t.Fatalf("state after restart lists %d uploads", a2.Uploaded())
	}
	poll(t, a2)
	if st := poll(t, a2); st.Uploaded != 0 || st.Pending != 0 {
		t.Fatalf("after restart: %+v, want nothing to do", st)
	}
	if _, err := os.Stat(filepath.Join(dir.Path(), jaxsync.StateFile)); err != nil {
		t.Fatal(err)
	}
}

// TestAgentBadStateFile: a corrupt state file is a clear error, not a
// silent re-upload of everything.
func TestAgentBadStateFile(t *testing.T) {
	dir, _ := jaxcache.Open(t.TempDir())
	os.WriteFile(filepath.Join(dir.Path(), jaxsync.StateFile), []byte("{not json"), 0o644)
	cl, _ := client.New(client.Config{BaseURL: "http://127.0.0.1:1"})
	_, err := jaxsync.NewAgent(jaxsync.AgentConfig{Client: cl, Namespace: "default", Dir: dir})
	if err == nil {
		t.Fatal("corrupt state file accepted")
	}
	t.Log(err)
}
