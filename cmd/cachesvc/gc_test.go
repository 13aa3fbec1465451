package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

// TestGcCommand runs `cachesvc gc` in-process against versitygw, on a bucket
// holding one entry stored 800 h ago (its objects back-dated in the
// server's directory) and one stored now.
func TestGcCommand(t *testing.T) {
	srv := s3test.Start(t)
	creds := filepath.Join(t.TempDir(), "credentials")
	writeFile(t, creds, "[default]\naws_access_key_id = "+s3test.AccessKey+"\naws_secret_access_key = "+s3test.SecretKey+"\n[wrong]\naws_access_key_id = "+s3test.AccessKey+"\naws_secret_access_key = nope\n")
	ctx := context.Background()

	// seed makes a bucket with an old and a fresh entry and returns it.
	seed := func(t *testing.T) string {
		bucket := srv.NewBucket(t)
		st, err := s3.Open(ctx, s3.Config{
			Endpoint: srv.Endpoint, Bucket: bucket, Prefix: "fleet/", Region: s3test.Region, Insecure: true,
			AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, UsageInterval: -1, InlineMax: -1,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for _, e := range []struct {
			name, data string
			age        time.Duration
		}{{"old", "old bytes", 800 * time.Hour}, {"new", "new bytes!", 0}} {
			key := store.Key(sha256.Sum256([]byte(e.name)))
			if _, err := st.Put(ctx, "default", key, strings.NewReader(e.data), store.PutOptions{Size: int64(len(e.data))}); err != nil {
				t.Fatal(err)
			}
			if e.age > 0 {
				sum := sha256.Sum256([]byte(e.data))
				at := time.Now().Add(-e.age)
				for _, obj := range []string{"fleet/entries/default/" + key.String(), "fleet/blobs/" + store.Key(sum).String()} {
					if err := os.Chtimes(srv.ObjectPath(bucket, obj), at, at); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		return bucket
	}
	count := func(t *testing.T, bucket string) int {
		n := 0
		for obj := range srv.Client(t, nil).ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "fleet/", Recursive: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			n++
		}
		return n
	}
	base := []string{"gc", "--s3-endpoint", "http://" + srv.Endpoint, "--s3-prefix", "fleet", "--s3-region", s3test.Region}

	tests := []struct {
		name    string
		args    []string // after base, with BUCKET replaced by a seeded bucket
		env     map[string]string
		code    int
		stdout  []string
		stderr  string
		objects int // left under fleet/ (4 before)
	}{
		{"help", []string{"--help"}, nil, 0, []string{"--older-than age", "(default 30d)"}, "", 4},
		{"dry run", []string{"--s3-bucket", "BUCKET", "--s3-credentials-file", creds, "--dry-run"}, nil, 0,
			[]string{"(dry run: nothing removed)", "entries      kept 1 (0 by access logs), would remove 1", "would remove 1 (9 B)"}, "", 4},
		{"removes the old entry", []string{"--s3-bucket", "BUCKET", "--s3-credentials-file", creds}, nil, 0,
			[]string{"gc of s3://", "older than 30d, grace 1h0m0s", "entries      kept 1 (0 by access logs), removed 1", "blobs        kept 1 (10 B; 0 in their grace), removed 1 (9 B)"}, "", 2},
		{"credentials from the environment", []string{"--s3-bucket", "BUCKET"},
			map[string]string{"AWS_ACCESS_KEY_ID": s3test.AccessKey, "AWS_SECRET_ACCESS_KEY": s3test.SecretKey}, 0,
			[]string{"removed 1"}, "", 2},
		{"older than from CACHESVC_OLDER_THAN", []string{"--s3-bucket", "BUCKET", "--s3-credentials-file", creds, "--json"},
			map[string]string{"CACHESVC_OLDER_THAN": "1000h"}, 0, []string{`"entries_kept": 2`, `"entries_removed": 0`}, "", 4},
		{"wrong secret", []string{"--s3-bucket", "BUCKET", "--s3-credentials-file", creds, "--s3-profile", "wrong"}, nil, 1, nil, "check the credentials", 4},
		{"missing credentials file", []string{"--s3-bucket", "BUCKET", "--s3-credentials-file", creds + ".missing"}, nil, 1, nil, "read --s3-credentials-file", 4},
		{"no such bucket", []string{"--s3-bucket", "no-such-bucket", "--s3-credentials-file", creds}, nil, 1, nil, "open s3://no-such-bucket on 127.0.0.1:", 4},
		{"no such bucket says what to do", []string{"--s3-bucket", "no-such-bucket", "--s3-credentials-file", creds}, nil, 1, nil, "the bucket does not exist: create it", 4},
		{"https to a plain-HTTP server", []string{"--s3-endpoint", srv.Endpoint, "--s3-bucket", "BUCKET", "--s3-credentials-file", creds}, nil, 1, nil,
			"the server speaks plain HTTP, not HTTPS: give --s3-endpoint as http://HOST:PORT", 4},
		{"no bucket", nil, nil, 2, nil, "--s3-endpoint needs --s3-bucket", 4},
		{"grace over age", []string{"--s3-bucket", "BUCKET", "--grace", "48h", "--older-than", "24h"}, nil, 2, nil, "longer than --older-than", 4},
		{"older than in days", []string{"--s3-bucket", "BUCKET", "--s3-credentials-file", creds, "--older-than", "42d", "--json"}, nil, 0,
			[]string{`"entries_kept": 2`, `"entries_removed": 0`}, "", 4},
		// Access logs are flushed every 5m: a shorter age removed entries served minutes ago.
		{"age under the access logs' flush", []string{"--s3-bucket", "BUCKET", "--older-than", "2m", "--grace", "1m"}, nil, 2, nil,
			"--older-than 2m0s is too short: replicas record what they serve in access logs flushed every 5m0s", 4},
		// The default --grace (1h) was checked first: --older-than 5m was
		// told about a grace the user never gave, and 30m, which the README
		// allows, was refused without saying what to change.
		{"short age without grace names the age", []string{"--s3-bucket", "BUCKET", "--older-than", "5m"}, nil, 2, nil,
			"--older-than 5m0s is too short", 4},
		{"age under the default grace says what to do", []string{"--s3-bucket", "BUCKET", "--older-than", "30m"}, nil, 2, nil,
			"--grace 1h0m0s (the default) is longer than --older-than 30m0s: give --grace 30m0s or less", 4},
		{"zero age", []string{"--s3-bucket", "BUCKET", "--older-than", "0s"}, nil, 2, nil, `age "0s" must be a positive duration such as 36h, 90m or 30d`, 4},
		{"age not a duration", []string{"--s3-bucket", "BUCKET", "--older-than", "a month"}, nil, 2, nil, `invalid value "a month" for --older-than`, 4},
		{"extra argument", []string{"--s3-bucket", "BUCKET", "now"}, nil, 2, nil, "unexpected arguments: now", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The AWS variables of the machine running the tests must not
			// decide a case.
			for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE", "AWS_PROFILE"} {
				t.Setenv(k, tt.env[k])
			}
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
			t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			bucket := seed(t)
			args := append([]string(nil), base...)
			for _, a := range tt.args {
				args = append(args, strings.ReplaceAll(a, "BUCKET", bucket))
			}
			var stdout, stderr bytes.Buffer
			code := run(ctx, args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout %s; stderr %s", code, tt.code, stdout.String(), stderr.String())
			}
			for _, want := range tt.stdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
				}
			}
			if tt.stderr != "" && !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, stderr.String())
			}
			if n := count(t, bucket); n != tt.objects {
				t.Errorf("%d objects left, want %d", n, tt.objects)
			}
		})
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
