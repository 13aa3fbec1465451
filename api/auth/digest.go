package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Digest returns "sha256:<first 12 hex>" of the rules in force: every
// rule's name, token hash and scopes (the anonymous rule's too), in name
// order, so two files that differ only in line order, spacing or comments
// agree, and a rotated token, a changed scope or a missing line do not. A
// fleet replica publishes it, so that replicas on different tokens (one
// missed the SIGHUP of a rotation) are named. Only hashes of tokens go into
// it, truncated: it reveals nothing a tokens file does not.
func (t *Tokens) Digest() string {
	rules := append([]Rule(nil), t.rules...)
	if t.anonymous != nil {
		rules = append(rules, *t.anonymous)
	}
	slices.SortFunc(rules, func(a, b Rule) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	for _, r := range rules {
		scopes := make([]string, 0, len(r.Scopes))
		for ns, sc := range r.Scopes {
			scopes = append(scopes, ns+":"+sc.String())
		}
		slices.Sort(scopes)
		fmt.Fprintf(h, "%s %x %s\n", r.Name, r.Hash, strings.Join(scopes, ","))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:6])
}
