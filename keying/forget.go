package keying

// ForgetPlugin drops from the memo every result the plugin id
// ("name@version") gave, and returns how many. Serve calls it when a
// reload replaces a plugin's file under the same name@version: fromMemo
// would not use those results anyway (each records its code's hash, see
// code.go), but they would take memo room and count as other code one by
// one. The memo file, if any, is rewritten without them at the next save.
// Results the shared memo (the fleet's) holds are not touched: it keeps
// each code's results apart, and other replicas may still run the old
// file.
//
// A key computed while ForgetPlugin runs is returned but not memoized, as
// it may come from the old code.
func (k *Keyer) ForgetPlugin(id string) int {
	k.mu.Lock()
	k.forgets++
	var gone [][32]byte
	if k.memo != nil {
		k.memo.oldestFirst(func(d [32]byte, r Result) {
			if r.Plugin == id {
				gone = append(gone, d)
			}
		})
		for _, d := range gone {
			k.memo.remove(d)
		}
	}
	k.mu.Unlock()
	if len(gone) > 0 && k.persist != nil {
		k.persist.dirty.Store(true)
	}
	return len(gone)
}

// forgetGen returns the count of ForgetPlugin calls, for memoize.
func (k *Keyer) forgetGen() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.forgets
}
