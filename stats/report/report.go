// Package report fetches a server's statistics (GET /v1/stats or
// /v1/{ns}/stats) and renders them as terminal tables; `cachesvc stats`
// is a thin wrapper around it.
package report

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// Fetch reads the statistics of server (a base URL such as
// http://cache:8080), for namespace ns or for all namespaces when ns is
// empty. token, when set, is sent as a bearer token.
func Fetch(ctx context.Context, hc *http.Client, server, ns, token string) (*wire.StatsResponse, error) {
	return FetchScope(ctx, hc, server, ns, token, "")
}

// StatusError is an answer of the stats route other than 200: its status,
// its error code when the server sent cachesvc's JSON error ("" otherwise),
// and a message naming the URL.
type StatusError struct {
	Status int
	Code   string
	msg    string
}

// Error returns "get URL: message (code, HTTP status)".
func (e *StatusError) Error() string { return e.msg }

// FetchScope is Fetch with the scope of GET /v1/stats: "" or "replica"
// (the server's own numbers) or "fleet" (also every replica's health and
// the fleet's merged totals; all namespaces only).
func FetchScope(ctx context.Context, hc *http.Client, server, ns, token, scope string) (*wire.StatsResponse, error) {
	base, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("server %q is not an http(s) URL such as http://cache:8080", server)
	}
	u := base.String() + "/v1/stats"
	if ns != "" {
		u = base.String() + "/v1/" + url.PathEscape(ns) + "/stats"
	}
	if scope != "" {
		u += "?scope=" + url.QueryEscape(scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("build request %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err // a *url.Error: it names the method and URL
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, 64<<20)
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		data, _ := io.ReadAll(io.LimitReader(body, 64<<10))
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			return nil, &StatusError{Status: resp.StatusCode, Code: e.Error.Code,
				msg: fmt.Sprintf("get %s: %s (%s, HTTP %d)", u, e.Error.Message, e.Error.Code, resp.StatusCode)}
		}
		// Another service answered (wrong port, a proxy): say so, not a
		// bare status.
		foreign := wire.ForeignAnswer(resp.StatusCode, resp.Header.Get("Content-Type"), data)
		return nil, &StatusError{Status: resp.StatusCode, msg: fmt.Sprintf("get %s: HTTP %d, %s", u, resp.StatusCode, foreign)}
	}
	var r wire.StatsResponse
	if err := json.NewDecoder(body).Decode(&r); err != nil {
		return nil, fmt.Errorf("decode %s: %w", u, err)
	}
	return &r, nil
}

// Options tune Render. The zero value prints everything.
type Options struct {
	// Server is shown in the heading.
	Server string
	// Namespace is shown in the heading; empty means all.
	Namespace string
	// Now is the clock for "last seen"; zero means time.Now.
	Now time.Time
}

// Render writes r as a summary and tables to w.
func Render(w io.Writer, r *wire.StatsResponse, o Options) error {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	scope := "all namespaces"
	if o.Namespace != "" {
		scope = "namespace " + o.Namespace
	}
	if r.Fleet != nil {
		// The fleet's merged numbers replace the replica's; the store,
		// leases and recent misses stay per replica (the table shows each
		// hot tier).
		fr := *r
		fr.Snapshot, fr.RecentMisses = r.Fleet.Totals, nil
		r = &fr
		scope += fmt.Sprintf(" · fleet of %s", Plural(int64(len(r.Fleet.Replicas)), "replica", "replicas"))
	}
	t := r.Totals
	p := &printer{w: w}
	p.f("cachesvc stats · %s · %s\n", o.Server, scope)
	p.f("\n")
	renderFormatNote(p, r) // compat.go
	waits := ""
	if t.WaitHits > 0 { // the misses those waiters had first compiled nothing
		waits = "; " + Plural(t.WaitHits, "hit", "hits") + " after waiting on a compile lease"
	}
	p.f("Lookups     %s  (hits %s, misses %s%s)\n", Num(t.Lookups), Num(t.Hits), Num(t.Misses), waits)
	p.f("Hit rate    %s\n", Rate(t.HitRate, t.Lookups))
	saved := Duration(t.CompileSecondsSaved)
	if t.CompileSecondsSaved >= 120 { // Duration rounds to minutes or hours: give the exact seconds too
		saved += " (" + Float(t.CompileSecondsSaved) + " s)"
	}
	p.f("Time saved  %s of compiling\n", saved)
	p.f("Bytes       %s served, %s stored in %s\n", Bytes(t.BytesOut), Bytes(t.BytesIn), Plural(t.Writes, "write", "writes"))
	if o.Namespace != "" {
		renderNamespaceStore(p, r, o.Namespace) // compat.go
	} else {
		// The persisted count: the store's own starts again at 0 with every
		// restart (the larger of the two, for a server whose totals lack it).
		u := r.Store
		if r.Fleet == nil {
			if h := hotOf(r); h != nil { // a replica's evictions are its hot tier's
				hot := *h
				hot.Evictions = max(hot.Evictions, t.Evictions)
				u.Hot = &hot
			} else {
				u.Evictions = max(u.Evictions, t.Evictions)
			}
		}
		renderStoreTiers(p, r, u, o.Server, o.Now) // compat.go
	}
	p.f("Leases      %s held, %s waiting\n", Num(r.Leases.Held), Num(r.Leases.Waiting))
	if r.Fleet != nil {
		renderFleet(p, w, r.Fleet, o.Now)
	} else if sh := r.SharedTier; sh != nil && sh.Configured {
		p.f("Replica     one replica of a fleet (shared tier %s): these are its numbers; --scope fleet shows the fleet's\n", sharedState(*sh))
	}
	// A shared tier not listed yet may hold entries: not "empty".
	if t.Lookups == 0 && t.Writes == 0 && r.Store.Entries == 0 && r.Store.Uncounted == "" {
		p.f("\nThe cache is empty. Connect a trainer:\n")
		p.f("  import cachesvc.jax; cachesvc.jax.install(%q)\n", o.Server)
		p.f("  import cachesvc.torch; cachesvc.torch.install(%q)\n", o.Server)
		p.f("or set CACHESVC_URL=%s and CACHESVC_RUN=<run id> and call install() with no arguments;\n", o.Server)
		p.f("stock PyTorch needs no code: serve --redis-addr 0.0.0.0:6380 --tokens FILE (or a loopback address\n")
		p.f("without tokens), then TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE=1 TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1\n")
		p.f("TORCHINDUCTOR_REDIS_URL=redis://:<token>@<host>:6380.\n")
		return p.err
	}

	if len(r.Namespaces) > 0 {
		p.f("\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "NAMESPACE\tBACKEND\tLOOKUPS\tHITS\tMISSES\tHIT RATE\tSAVED\tSERVED\tWRITES\n")
		for _, n := range r.Namespaces {
			for _, b := range n.Backends {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Namespace, b.Backend, Num(b.Lookups), Num(b.Hits), Num(b.Misses),
					Rate(b.HitRate, b.Lookups), Duration(b.CompileSecondsSaved), Bytes(b.BytesOut), Num(b.Writes))
			}
		}
		p.flush(tw)
	}
	if len(r.Runs) > 0 {
		p.f("\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "RUN\tNAMESPACES\tLOOKUPS\tHITS\tHIT RATE\tTIME SAVED\tLAST SEEN\n")
		for _, run := range r.Runs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", run.Run, strings.Join(run.Namespaces, ","), Num(run.Lookups), Num(run.Hits),
				Rate(run.HitRate, run.Lookups), Duration(run.CompileSecondsSaved), Ago(o.Now, run.LastSeen))
		}
		p.flush(tw)
	}
	if len(r.TopEntries) > 0 {
		p.f("\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "TOP ENTRY\tKEY\tNAMESPACE\tCOMPILE\tHITS\tSAVED\n")
		for i, e := range r.TopEntries {
			if i == 10 {
				break
			}
			name := wire.OneLine(e.Name, maxNameWidth)
			if name == "" {
				name = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, e.Key[:min(12, len(e.Key))], e.Namespace, Duration(e.CompileSeconds), Num(e.Hits), Duration(e.SecondsSaved))
		}
		p.flush(tw)
	}
	if len(r.MissReasons) > 0 {
		p.f("\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "MISSES BY REASON\tCOUNT\n")
		for _, rc := range r.MissReasons {
			fmt.Fprintf(tw, "%s\t%s\n", rc.Label, Num(rc.Count))
		}
		p.flush(tw)
	}
	if len(r.RecentMisses) > 0 {
		p.f("\nRecent misses:\n")
		for i, m := range r.RecentMisses {
			if i == 5 {
				break
			}
			name := m.DisplayName
			if name == "" {
				name = m.Key
			}
			p.f("  %s  %s/%s  %s\n    %s\n", Ago(o.Now, m.Time), m.Namespace, m.Backend, name, m.Explanation.Summary)
		}
	}
	return p.err
}

// maxNameWidth is the widest entry name the top entries table prints: a
// JAX key (jit_step-<64 hex>) is 70 characters and pushed the table past a
// terminal's width, while its KEY column already tells entries apart.
const maxNameWidth = 40

// renderFleet writes the replicas' health, version, and each one's hot tier
// and numbers, as the dashboard's Fleet card does: the VERSION column is
// how a rolling upgrade's progress is watched from a terminal.
func renderFleet(p *printer, w io.Writer, f *wire.FleetStats, now time.Time) {
	p.f("Replicas    %s of %s healthy\n", Num(int64(f.Healthy)), Num(int64(len(f.Replicas))))
	renderMismatches(p, f.ConfigMismatches)
	if len(f.Replicas) == 0 {
		return
	}
	p.f("\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "REPLICA\tHEALTH\tHEARTBEAT\tVERSION\tHOT TIER\tSHARED TIER\tQUEUED\tLOOKUPS\tHIT RATE\n")
	for _, rp := range f.Replicas {
		version := wire.OneLine(rp.Version, maxNameWidth)
		if version == "" {
			version = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s in %s\t%s\t%s\t%s\t%s\n", rp.ID, rp.Health, Ago(now, rp.Heartbeat), version, Bytes(rp.Hot.Bytes),
			Plural(rp.Hot.Entries, "entry", "entries"), sharedState(rp.Shared), Num(rp.Shared.QueueDepth), Num(rp.Totals.Lookups),
			Rate(rp.Totals.HitRate, rp.Totals.Lookups))
	}
	p.flush(tw)
}

// sharedState names a replica's view of the shared tier.
func sharedState(s wire.SharedTierState) string {
	if s.Reachable {
		return "reachable"
	}
	return "unreachable"
}

// storeLine describes the whole store: size, entries, limit, evictions.
func storeLine(u wire.StoreUsage) string {
	return fmt.Sprintf("%s in %s (%s); %s, %s", Bytes(u.Bytes), Plural(u.Entries, "entry", "entries"), limitText(u),
		Plural(u.Evictions, "eviction", "evictions"), Plural(u.IntegrityFailures, "integrity failure", "integrity failures"))
}

// namespaceUsage returns ns's usage from u.Namespaces, if the server sent it.
func namespaceUsage(u wire.StoreUsage, ns string) (wire.NamespaceUsage, bool) {
	for _, n := range u.Namespaces {
		if n.Namespace == ns {
			return n, true
		}
	}
	return wire.NamespaceUsage{}, false
}

// nsStoreLine describes one namespace's share of the store and its quota.
func nsStoreLine(n wire.NamespaceUsage) string {
	var quota []string
	if n.MaxBytes > 0 {
		quota = append(quota, fmt.Sprintf("quota %s, %.0f%% used", Bytes(n.MaxBytes), 100*float64(n.Bytes)/float64(n.MaxBytes)))
	}
	if n.MaxEntries > 0 {
		quota = append(quota, "at most "+Plural(n.MaxEntries, "entry", "entries"))
	}
	if len(quota) == 0 {
		quota = append(quota, "no quota")
	}
	return fmt.Sprintf("%s in %s (%s); %s, %s", Bytes(n.Bytes), Plural(n.Entries, "entry", "entries"), strings.Join(quota, "; "),
		Plural(n.Evictions, "eviction", "evictions"), Plural(n.Expirations, "expiration", "expirations"))
}

// Plural formats a count with the noun that agrees with it: "1 write",
// "2 writes", "1,000 entries".
func Plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return Num(n) + " " + many
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) flush(tw *tabwriter.Writer) {
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
}

// Num formats n with thousands separators: 1234567 → "1,234,567".
func Num(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Float formats seconds exactly, with thousands separators and at most
// three decimals: 1875 → "1,875", 937.5 → "937.5".
func Float(f float64) string {
	whole := int64(f)
	frac := strings.TrimRight(strings.TrimPrefix(fmt.Sprintf("%.3f", f-float64(whole)), "0"), "0")
	if frac == "." {
		frac = ""
	}
	return Num(whole) + frac
}

// Rate formats a hit rate as a percentage, or "-" without lookups.
func Rate(r float64, lookups int64) string {
	if lookups == 0 {
		return "-"
	}
	// Halves up, as the dashboard's toFixed: 1 hit of 16 is 6.3% in both.
	return fmt.Sprintf("%.1f%%", math.Floor(1000*r+0.5)/10)
}

// Duration formats seconds for humans: "45 s", "12.5 min", "3.2 h".
func Duration(sec float64) string {
	switch {
	case sec < 120:
		// Halves up, as the dashboard's Math.round: 32.25 s is "32.3 s" in both.
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", math.Floor(sec*10+0.5)/10), "0"), ".") + " s"
	case sec < 2*3600:
		return fmt.Sprintf("%.1f min", sec/60)
	case sec < 3*86400:
		return fmt.Sprintf("%.1f h", sec/3600)
	}
	return fmt.Sprintf("%.1f days", sec/86400)
}

// Bytes formats a byte count in binary units: "1.5 MiB", "216 KiB".
func Bytes(n int64) string {
	f := float64(n)
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	// As the dashboard prints it (util.js CS.bytes): no decimal from 100
	// up, so that both show "216 KiB" for the same traffic.
	// Halves round up, as JavaScript's toFixed does (fmt rounds them to
	// even): 1280 bytes is "1.3 KiB" in both.
	if f >= 100 {
		return fmt.Sprintf("%.0f %s", math.Floor(f+0.5), units[i])
	}
	return fmt.Sprintf("%.1f %s", math.Floor(f*10+0.5)/10, units[i])
}

// Ago formats how long before now t was: "12 s ago".
func Ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 5*time.Second:
		return "just now"
	case d < 90*time.Second:
		return fmt.Sprintf("%d s ago", int(d.Seconds()))
	case d < 90*time.Minute:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}
