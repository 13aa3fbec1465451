package tiered_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestConformanceSeaweedFS runs the core contract on SeaweedFS, a second
// S3 engine (opt-in: CACHESVC_SEAWEEDFS=1 after scripts/seaweedfs.sh).
// SeaweedFS's files are not objects, so damage goes through the S3 API: the
// blob is overwritten with bytes of the same length.
func TestConformanceSeaweedFS(t *testing.T) {
	srv := s3test.StartSeaweedFS(t)
	open := openOn(srv)
	corrupt := func(t *testing.T, dir string, data []byte) {
		mid := len(data) / 2
		if _, err := storetest.FlipInValueLog(filepath.Join(dir, "hot"), data[mid:mid+64]); err != nil {
			t.Fatal(err)
		}
		bad := bytes.Clone(data)
		bad[mid] ^= 0xff
		sum := sha256.Sum256(data)
		c := srv.Client(t, nil)
		_, err := c.PutObject(context.Background(), bucketOf(dir), "fleet/blobs/"+hex.EncodeToString(sum[:]),
			io.Reader(bytes.NewReader(bad)), int64(len(bad)), minio.PutObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	storetest.Run(t, open, corrupt)
}
