package s3test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// SeaweedFSBinary returns the path of SeaweedFS's weed binary:
// $CACHESVC_WEED, or $XDG_CACHE_HOME/cachesvc/bin/weed (scripts/seaweedfs.sh
// builds it there).
func SeaweedFSBinary() (string, error) {
	if p := os.Getenv("CACHESVC_WEED"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("CACHESVC_WEED=%s: %w", p, err)
		}
		return p, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the cache directory: %w", err)
	}
	p := filepath.Join(dir, "cachesvc", "bin", "weed")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("weed not found at %s (run scripts/seaweedfs.sh, or set CACHESVC_WEED): %w", p, err)
	}
	return p, nil
}

// StartSeaweedFS runs `weed mini` (master, volume, filer and S3 in one
// process) on free loopback ports with a fresh data directory, for the
// opt-in second-engine tests: it skips the test unless CACHESVC_SEAWEEDFS=1,
// and then fails it when the binary is missing. The root credentials are
// AccessKey and SecretKey, as for versitygw. Server.Dir is SeaweedFS's data
// directory, whose files are not objects: ObjectPath means nothing here.
func StartSeaweedFS(t testing.TB) *Server {
	t.Helper()
	if os.Getenv("CACHESVC_SEAWEEDFS") != "1" {
		t.Skip("SeaweedFS tests are opt-in: CACHESVC_SEAWEEDFS=1 (after scripts/seaweedfs.sh)")
	}
	bin, err := SeaweedFSBinary()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Dir: t.TempDir(), bin: bin, name: "seaweedfs"}
	s.env = []string{"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey}
	s.log = filepath.Join(t.TempDir(), "weed.log")
	var lastErr error
	for range 3 {
		// Every listener on a free port: the defaults (8333, 9333, 8080,
		// 8888, ...) may be taken, and gRPC ports default to port+10000.
		ports := make([]int, 12)
		for i := range ports {
			if ports[i], err = freePort(); err != nil {
				t.Fatal(err)
			}
		}
		s.Endpoint = fmt.Sprintf("127.0.0.1:%d", ports[0])
		s.args = []string{"mini", "-dir=" + s.Dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
			fmt.Sprintf("-s3.port=%d", ports[0]), fmt.Sprintf("-s3.port.grpc=%d", ports[1]),
			fmt.Sprintf("-master.port=%d", ports[2]), fmt.Sprintf("-master.port.grpc=%d", ports[3]),
			fmt.Sprintf("-volume.port=%d", ports[4]), fmt.Sprintf("-volume.port.grpc=%d", ports[5]),
			fmt.Sprintf("-filer.port=%d", ports[6]), fmt.Sprintf("-filer.port.grpc=%d", ports[7]),
			fmt.Sprintf("-webdav.port=%d", ports[8]), fmt.Sprintf("-admin.port=%d", ports[9]),
			fmt.Sprintf("-admin.port.grpc=%d", ports[10]), "-admin.port.legacy=0",
			fmt.Sprintf("-debug.port=%d", ports[11]),
		}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Stop)
			if lastErr = s.awaitBuckets(); lastErr == nil {
				return s
			}
			s.Stop()
		}
	}
	t.Fatalf("start seaweedfs: %v (log: %s)", lastErr, tail(s.log))
	return nil
}

// awaitBuckets waits until the S3 gateway can create a bucket: it answers
// HTTP before its filer and volume server are ready.
func (s *Server) awaitBuckets() error {
	c, err := minio.New(s.Endpoint, clientOptions(nil))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := c.MakeBucket(context.Background(), "cachesvc-probe", minio.MakeBucketOptions{Region: Region})
		if err == nil || minio.ToErrorResponse(err).Code == "BucketAlreadyOwnedByYou" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("seaweedfs on %s cannot create a bucket after 60s: %w", s.Endpoint, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
