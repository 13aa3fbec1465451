package registry

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/wire"
)

// TestFleetConfigMismatches publishes heartbeats of replicas configured
// differently into a real S3 bucket (versitygw) and reads the fleet back:
// the settings on which the live replicas disagree are named with the
// replicas per value; gone and stopped replicas and replicas that publish
// no config do not count.
func TestFleetConfigMismatches(t *testing.T) {
	srv := s3test.Start(t)
	now := time.Now().UTC().Truncate(time.Second)
	cfg := func(maxEntry int64, plugins []string, ns string) *wire.ReplicaConfig {
		return &wire.ReplicaConfig{MaxEntrySize: maxEntry, Plugins: plugins, Namespaces: ns}
	}
	keys := func(c *wire.ReplicaConfig, tokens, signingKey string) *wire.ReplicaConfig {
		c.Tokens, c.SigningKey = tokens, signingKey
		return c
	}
	xla1 := []string{"passthrough@1 sha256:aaaaaaaaaaaa", "xla@1 sha256:bbbbbbbbbbbb"}
	xla2 := []string{"passthrough@1 sha256:aaaaaaaaaaaa", "xla@2 sha256:cccccccccccc"}
	type replica struct {
		id    string
		age   time.Duration
		close bool
		cfg   *wire.ReplicaConfig
	}
	tests := []struct {
		name     string
		replicas []replica
		want     []wire.ConfigMismatch
	}{
		{"all agree", []replica{
			{"a", 0, false, cfg(4<<30, xla1, "sha256:111111111111")},
			{"b", 0, false, cfg(4<<30, xla1, "sha256:111111111111")},
		}, nil},
		{"three settings differ", []replica{
			{"a", 0, false, cfg(4<<30, xla1, "")},
			{"b", 0, false, cfg(1<<30, xla1, "sha256:111111111111")},
			{"c", 40 * time.Second, false, cfg(4<<30, xla2, "")}, // stale still counts
			{"d", 2 * time.Hour, false, cfg(8<<30, xla2, "")},    // gone: ignored
			{"e", time.Minute, true, cfg(8<<30, xla2, "")},       // stopped: ignored
			{"f", 0, false, nil},                                 // an older replica: ignored
		}, []wire.ConfigMismatch{
			{Setting: "max_entry_size", Values: []wire.ConfigValue{{Value: "4294967296", Replicas: []string{"a", "c"}}, {Value: "1073741824", Replicas: []string{"b"}}}},
			{Setting: "plugins", Values: []wire.ConfigValue{{Value: "passthrough@1 sha256:aaaaaaaaaaaa, xla@1 sha256:bbbbbbbbbbbb", Replicas: []string{"a", "b"}},
				{Value: "passthrough@1 sha256:aaaaaaaaaaaa, xla@2 sha256:cccccccccccc", Replicas: []string{"c"}}}},
			{Setting: "namespaces", Values: []wire.ConfigValue{{Value: "none", Replicas: []string{"a", "c"}}, {Value: "sha256:111111111111", Replicas: []string{"b"}}}},
		}},
		// A token rotation that one replica missed (its SIGHUP, or a copy
		// of the tokens file), and a signing key rolled out half way: the
		// first refuses the new token (401) one request in three behind a
		// load balancer, the second fails the clients' signature check.
		// A replica too old to publish either ("") is not compared.
		{"tokens and signing key differ", []replica{
			{"a", 0, false, keys(cfg(4<<30, xla1, ""), "sha256:222222222222", "none")},
			{"b", 0, false, keys(cfg(4<<30, xla1, ""), "sha256:222222222222", "iZxWLQfKXbsWGJNFqATVzwVuxFl3pHaTuMhaADcC7rA=")},
			{"c", 0, false, keys(cfg(4<<30, xla1, ""), "sha256:333333333333", "iZxWLQfKXbsWGJNFqATVzwVuxFl3pHaTuMhaADcC7rA=")},
			{"d", 0, false, keys(cfg(4<<30, xla1, ""), "", "")},
		}, []wire.ConfigMismatch{
			{Setting: "tokens", Values: []wire.ConfigValue{{Value: "sha256:222222222222", Replicas: []string{"a", "b"}}, {Value: "sha256:333333333333", Replicas: []string{"c"}}}},
			{Setting: "signing_key", Values: []wire.ConfigValue{{Value: "iZxWLQfKXbsWGJNFqATVzwVuxFl3pHaTuMhaADcC7rA=", Replicas: []string{"b", "c"}}, {Value: "none", Replicas: []string{"a"}}}},
		}},
		{"older replicas say nothing of tokens", []replica{
			{"a", 0, false, keys(cfg(4<<30, xla1, ""), "sha256:222222222222", "none")},
			{"b", 0, false, cfg(4<<30, xla1, "")},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := testBucket(t, srv)
			for _, rp := range tt.replicas {
				r, err := New(Config{Bucket: b, ID: rp.id, Logger: quiet, Now: func() time.Time { return now.Add(-rp.age) },
					Sample: func() Sample { return Sample{Config: rp.cfg} }})
				if err != nil {
					t.Fatal(err)
				}
				if rp.close {
					err = r.Close(context.Background())
				} else {
					err = r.Publish(context.Background())
				}
				if err != nil {
					t.Fatalf("publish %s: %v", rp.id, err)
				}
			}
			reader, err := New(Config{Bucket: b, ID: "reader", Logger: quiet, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			fleet, err := reader.Fleet(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fleet.ConfigMismatches, tt.want) {
				t.Fatalf("mismatches\n got %+v\nwant %+v", fleet.ConfigMismatches, tt.want)
			}
		})
	}
}
