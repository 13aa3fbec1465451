package report

import (
	"strconv"
	"strings"

	"github.com/cachesvc/cachesvc/wire"
)

// mismatchMeaning says, per setting, what replicas that disagree on it do
// wrong and what to do.
var mismatchMeaning = map[string]string{
	"max_entry_size": "an upload one replica refuses (413) another stores; give every replica the same --max-entry-size",
	"plugins":        "one signature gets different keys on different replicas (misses); load the same --plugins files (name@version and code) everywhere",
	"namespaces":     "quotas and expiry differ by replica; give every replica the same --namespaces file and SIGHUP them",
	"tokens":         "a token one replica accepts another refuses (401, or 403 for a changed scope); give every replica the same --tokens file and SIGHUP them all (a replica whose reload failed logs why and keeps its old tokens)",
	"signing_key":    "clients that check signatures refuse what the other replicas sign (bad_signature, then a compile); give every replica the same --signing-key and restart it, and clients its public key",
}

// renderMismatches writes one warning per setting on which the fleet's
// live replicas disagree, naming each value and its replicas.
func renderMismatches(p *printer, ms []wire.ConfigMismatch) {
	for _, m := range ms {
		p.f("WARNING     replicas disagree on %s: %s\n", m.Setting, mismatchMeaning[m.Setting])
		for _, v := range m.Values {
			p.f("              %s: %s\n", mismatchValue(m.Setting, v.Value), strings.Join(v.Replicas, ", "))
		}
	}
}

// mismatchValue shows a value of setting as a person reads it.
func mismatchValue(setting, v string) string {
	if setting == "max_entry_size" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return Bytes(n)
		}
	}
	return v
}
