package lease

// Counts returns the number of live (unexpired) leases this table granted
// and of parked waiters, for metrics.
func (t *Table) Counts() (held, waiting int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, s := range t.slots {
		if s.holder != "" && !s.remote && now.Before(s.expires) {
			held++
		}
	}
	return held, t.waiters
}

// CountsIn is Counts for namespace ns alone, for an answer to a reader of
// ns, which must not show other namespaces' activity.
func (t *Table) CountsIn(ns string) (held, waiting int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for id, s := range t.slots {
		if id.ns != ns {
			continue
		}
		if s.holder != "" && !s.remote && now.Before(s.expires) {
			held++
		}
		waiting += len(s.waiters)
	}
	return held, waiting
}
