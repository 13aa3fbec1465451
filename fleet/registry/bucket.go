package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
)

// Object name prefixes under the fleet's prefix, beside store/s3's blobs/,
// entries/, uploads/ and quarantine/.
const (
	// ReplicasDir holds one heartbeat object per replica: <id>.json.
	ReplicasDir = "replicas/"
	// AccessDir holds the access logs: <id>/<unix nanoseconds>.json.
	AccessDir = "access/"
)

// Bucket is the shared tier's bucket and prefix, with a client for it: what
// the registry, the access log and gc talk to.
type Bucket struct {
	// Client is the S3 client.
	Client *minio.Client
	// Name is the bucket's name.
	Name string
	// Prefix is s3.Config.Prefix, ending in "/" unless empty.
	Prefix string

	// onListed, when set (tests only, before any listing), sees each
	// object List lists, so a test can cancel between two pages.
	onListed func(key string)
}

// Dial returns a Bucket for cfg, with a client built by the rules of
// s3.Open: path-style addressing, Config.MaxRetries (default 3) retries,
// and when cfg.AccessKey is empty the standard AWS credential sources in
// turn (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the shared credentials
// file AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, instance
// metadata). It does no I/O: a bad endpoint shows at the first request.
func Dial(cfg s3.Config) (*Bucket, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, fmt.Errorf("dial s3: %w: endpoint and bucket are required", store.ErrInvalid)
	}
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	c, err := s3.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("dial s3: %w", err)
	}
	return &Bucket{Client: c, Name: cfg.Bucket, Prefix: cfg.Prefix}, nil
}

// ReplicaObject is the name of replica id's heartbeat object.
func (b *Bucket) ReplicaObject(id string) string {
	return b.Prefix + ReplicasDir + id + ".json"
}

// AccessPrefix is the prefix of replica id's access logs ("" for every
// replica's).
func (b *Bucket) AccessPrefix(id string) string {
	if id == "" {
		return b.Prefix + AccessDir
	}
	return b.Prefix + AccessDir + id + "/"
}

// validID is what a replica id may be: it is part of object names.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckID returns an error wrapping store.ErrInvalid unless id is a valid
// replica id: 1 to 128 of [A-Za-z0-9._-], starting with a letter or digit.
func CheckID(id string) error {
	if !validID.MatchString(id) {
		return fmt.Errorf("replica id %q: %w: want 1 to 128 of [A-Za-z0-9._-], starting with a letter or digit", id, store.ErrInvalid)
	}
	return nil
}

// DefaultID returns the default replica id for a replica whose data
// directory is dataDir: "<hostname>-<first 8 hex digits of sha256(absolute
// dataDir)>", lowercased, characters outside [a-z0-9._-] replaced by "-".
// It is stable across restarts of the same replica (same host, same
// directory) and differs between replicas sharing a host, so that a
// restarted replica overwrites its own heartbeat and stats instead of
// appearing twice. Hosts whose name changes at every start (a Kubernetes
// Deployment) get a new id each time; the old one turns gone and gc
// removes it. Set the id explicitly (a StatefulSet's pod name) to avoid
// that.
func DefaultID(dataDir string) (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("default replica id: %w", err)
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("default replica id: %w", err)
	}
	return defaultID(host, abs), nil
}

func defaultID(host, absDir string) string {
	sum := sha256.Sum256([]byte(absDir))
	h := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, host)
	h = strings.TrimLeft(h, "._-")
	if len(h) > 100 {
		h = h[:100]
	}
	if h == "" {
		h = "replica"
	}
	return h + "-" + hex.EncodeToString(sum[:4])
}
