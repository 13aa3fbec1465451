package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/wire"
)

// TestListKeepsOnlyWebURLs: a heartbeat's URL becomes a link on every
// replica's dashboard, so one that is not an absolute http(s) URL (a
// "javascript:" URL written by whoever can write the bucket) is dropped on
// reading; the replica is still listed.
func TestListKeepsOnlyWebURLs(t *testing.T) {
	b := testBucket(t, s3test.Start(t))
	want := map[string]string{
		"a": "http://a:8080",
		"b": "https://b.example/cache",
		"c": "",
		"d": "",
		"e": "",
		"f": "",
		"g": "",
	}
	urls := map[string]string{
		"a": "http://a:8080",
		"b": "https://b.example/cache",
		"c": "javascript:alert(document.cookie)",
		"d": "JavaScript://x%0aalert(1)",
		"e": "data:text/html,<script>alert(1)</script>",
		"f": "//evil.example",
		"g": "http://g\n:8080",
	}
	for id, u := range urls {
		js, _ := json.Marshal(wire.ReplicaStatus{ID: id, URL: u, Heartbeat: time.Now().UTC()})
		if _, err := b.Client.PutObject(context.Background(), b.Name, b.Prefix+ReplicasDir+id+".json", bytes.NewReader(js), int64(len(js)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := List(context.Background(), b, time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(urls) {
		t.Fatalf("listed %d replicas, want %d", len(list), len(urls))
	}
	for _, st := range list {
		if st.URL != want[st.ID] {
			t.Errorf("replica %s: URL %q, want %q", st.ID, st.URL, want[st.ID])
		}
	}
}
