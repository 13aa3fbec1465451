package keying

import "encoding/hex"

// A plugin file may be replaced by another under the same name@version (a
// fix that did not bump the version, or a rolling upgrade of a fleet). Keys
// hash name@version only, so the memo keeps each result's code hash
// (Result.PluginSHA256) and uses a result only while that code serves:
// fromMemo drops a result of other code here, the memo file keeps the
// hash, and the shared memo keeps each code's results apart
// (SharedMemo's code argument).

// maxOtherCodePlugins bounds the plugins OtherCode counts by name; the
// rest are counted under "_other".
const maxOtherCodePlugins = 64

// otherCode counts the memo results found to come from other code, per
// plugin, and remembers which plugins were warned about. The Keyer's mu
// guards it.
type otherCode struct {
	counts map[string]uint64
	warned map[string]bool
}

// dropOtherCode removes the memo's result res for digest, which another
// build of res.Plugin computed (running is the code that serves now),
// counts it and warns once per plugin.
func (k *Keyer) dropOtherCode(digest [32]byte, res Result, running string) {
	k.mu.Lock()
	if cur, ok := k.memo.peek(digest); ok && cur.PluginSHA256 == res.PluginSHA256 {
		k.memo.remove(digest)
	}
	o := &k.other
	if o.counts == nil {
		o.counts, o.warned = map[string]uint64{}, map[string]bool{}
	}
	label := res.Plugin
	if _, ok := o.counts[label]; !ok && len(o.counts) >= maxOtherCodePlugins {
		label = "_other"
	}
	o.counts[label]++
	warn := !o.warned[label]
	o.warned[label] = true
	k.mu.Unlock()
	if k.persist != nil {
		k.persist.dirty.Store(true)
	}
	if warn {
		k.logger().Warn("the signature memo holds keys that another build of this plugin computed; they are not used",
			"plugin", res.Plugin, "code_sha256", running, "memo_code_sha256", res.PluginSHA256,
			"signature_sha256", hex.EncodeToString(digest[:]), "key", res.Key.String(),
			"why", "the plugin's wasm file changed but not its name@version: such signatures are keyed again by the running code, "+
				"and get other keys than the old code gave them when it canonicalizes differently (their stored entries then miss); "+
				"bump version in the plugin's describe when its canonical bytes change")
	}
}

// OtherCodeCounts returns, per plugin name@version, how many memo results
// (the local memo, loaded from the memo file or computed before a reload)
// were found to come from other wasm
// code than the plugin running now and were not used. At most
// maxOtherCodePlugins plugins are named; the rest count under "_other".
func (k *Keyer) OtherCodeCounts() map[string]uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]uint64, len(k.other.counts))
	for p, n := range k.other.counts {
		out[p] = n
	}
	return out
}
