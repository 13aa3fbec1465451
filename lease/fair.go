package lease

// Fair shares: the table's bounds (Config.MaxLeases, Config.MaxWaiters) are
// shared by every namespace, so a full table takes room back from a
// namespace holding more than half of it instead of refusing the others:
// one team's client flooding leases or long polls fills its own half.

// displaceLeaseLocked makes room, in a full table, for a lease of namespace
// ns holding at most half of the table, by ending the lease that expires
// first of the namespace holding more than half (its waiters are woken
// with Expired and compile themselves). It reports whether it made room: a
// namespace flooding the table fills only its own half, never another's.
// It scans the table, but only when the table is full.
func (t *Table) displaceLeaseLocked(ns string) bool {
	big := overHalf(t.liveNS, ns, t.maxLeases)
	if big == "" {
		return false
	}
	var victim slotID
	var first *slot
	for id, s := range t.slots {
		if id.ns == big && s.holder != "" && !s.remote && (first == nil || s.expires.Before(first.expires)) {
			victim, first = id, s
		}
	}
	if first == nil {
		return false
	}
	t.endLocked(victim, first, Expired)
	return true
}

// overHalf returns the namespace other than ns that holds more than half of
// limit in counts, or "" when there is none or ns itself holds half or more.
func overHalf(counts map[string]int, ns string, limit int) string {
	if 2*counts[ns] >= limit {
		return ""
	}
	for other, n := range counts {
		if 2*n > limit {
			return other
		}
	}
	return ""
}

// displaceWaiterLocked makes room, when every waiter place is taken, for a
// waiter of namespace ns parking at most half of them, by waking one waiter
// of the namespace parking more than half with Displaced. It reports
// whether it made room.
func (t *Table) displaceWaiterLocked(ns string) bool {
	big := overHalf(t.waitersNS, ns, t.maxWaiters)
	if big == "" {
		return false
	}
	for id, s := range t.slots {
		if id.ns != big {
			continue
		}
		for w := range s.waiters {
			w.outcome = Displaced
			close(w.c)
			t.unparkLocked(id, s, w)
			return true
		}
	}
	return false
}

// decLocked lowers counts[ns] by n, forgetting a namespace at zero so that the
// maps hold only namespaces with leases or waiters.
func (t *Table) decLocked(counts map[string]int, ns string, n int) {
	if counts[ns] -= n; counts[ns] <= 0 {
		delete(counts, ns)
	}
}
