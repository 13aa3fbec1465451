package s3_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

// TestCheckBucket sorts what can go wrong when a bucket is opened into an
// outage (the replica starts on its hot tier) and configuration errors
// that say what to change. A server that accepts and never answers is an
// outage: its response-header timeout was taken for the caller's deadline,
// and a replica started while the bucket hung exited 1 after a minute.
func TestCheckBucket(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake it refuses
	tlsSrv.StartTLS()                                   // a certificate no system trusts
	defer tlsSrv.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	downAddr := down.Listener.Addr().String()
	down.Close()
	impatient := &http.Transport{ResponseHeaderTimeout: time.Second}
	for _, tc := range []struct {
		name        string
		endpoint    string
		insecure    bool
		bucket      string
		secret      string
		unavailable bool
		want        string            // in the error; "" for nil
		transport   http.RoundTripper // nil: minio's
	}{
		{"exists", srv.Endpoint, true, bucket, s3test.SecretKey, false, "", nil},
		{"no such bucket", srv.Endpoint, true, "no-such-bucket", s3test.SecretKey, false, "the bucket does not exist: create it", nil},
		{"wrong secret", srv.Endpoint, true, bucket, "wrong", false, "): check the credentials", nil},
		{"HTTPS to a plain-HTTP server", srv.Endpoint, false, bucket, s3test.SecretKey, false, "give --s3-endpoint as http://HOST:PORT", nil},
		{"untrusted certificate", strings.TrimPrefix(tlsSrv.URL, "https://"), false, bucket, s3test.SecretKey, false, "the server's TLS certificate is not trusted", nil},
		{"nothing listening", downAddr, true, bucket, s3test.SecretKey, true, "connection refused", nil},
		{"server never answers", stuckListener(t), true, bucket, s3test.SecretKey, true, "timeout awaiting response headers", impatient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := s3.NewClient(s3.Config{Endpoint: tc.endpoint, Bucket: tc.bucket, Region: s3test.Region, Insecure: tc.insecure,
				AccessKey: s3test.AccessKey, SecretKey: tc.secret, MaxRetries: 1, Transport: tc.transport})
			if err != nil {
				t.Fatal(err)
			}
			err = s3.CheckBucket(context.Background(), c, tc.bucket)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckBucket = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckBucket = %v, want an error containing %q", err, tc.want)
			case errors.Is(err, store.ErrUnavailable) != tc.unavailable:
				t.Fatalf("CheckBucket = %v: unavailable %v, want %v", err, errors.Is(err, store.ErrUnavailable), tc.unavailable)
			}
		})
	}
}
