package api_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
)

// qstep is one request of a quarantine scenario and what it must answer.
type qstep struct {
	name   string
	method string
	path   string // after /v1/default/; "{k}" and "{k2}" are the test keys
	tok    authtest.Token
	body   string
	status int
	code   string                         // error code, for errors
	check  func(t *testing.T, doc []byte) // more checks of the body
}

func runSteps(t *testing.T, srv *apitest.Server, keys map[string]string, steps []qstep) {
	t.Helper()
	for _, st := range steps {
		path, text := st.path, st.body
		for name, k := range keys {
			path = strings.ReplaceAll(path, name, k)
			text = strings.ReplaceAll(text, name, k)
		}
		var body *strings.Reader
		hdr := bearer(st.tok)
		if text != "" {
			body = strings.NewReader(text)
			hdr = append(hdr, "Content-Type", "application/json")
		}
		var resp *http.Response
		if body != nil {
			resp = srv.Do(st.method, srv.URL+"/v1/default/"+path, body, hdr...)
		} else {
			resp = srv.Do(st.method, srv.URL+"/v1/default/"+path, nil, hdr...)
		}
		doc := apitest.ReadAll(t, resp)
		if resp.StatusCode != st.status {
			t.Fatalf("%s: %s %s = %d %s, want %d", st.name, st.method, st.path, resp.StatusCode, doc, st.status)
		}
		if st.code != "" {
			if got := errCode(t, doc); got != st.code {
				t.Fatalf("%s: error code %q, want %q (%s)", st.name, got, st.code, doc)
			}
		}
		if st.check != nil {
			st.check(t, doc)
		}
	}
}

// reportIs checks a report answer's counts.
func reportIs(reports, distinct int, quarantined bool) func(t *testing.T, doc []byte) {
	return func(t *testing.T, doc []byte) {
		t.Helper()
		var r struct {
			Reports           int  `json:"reports"`
			DistinctReporters int  `json:"distinct_reporters"`
			Threshold         int  `json:"threshold"`
			Quarantined       bool `json:"quarantined"`
			Key               string
		}
		if err := json.Unmarshal(doc, &r); err != nil {
			t.Fatal(err)
		}
		if r.Reports != reports || r.DistinctReporters != distinct || r.Quarantined != quarantined || r.Threshold != 2 || len(r.Key) != 64 {
			t.Fatalf("report answer %s, want reports %d, distinct %d, quarantined %v, threshold 2", doc, reports, distinct, quarantined)
		}
	}
}

func TestQuarantineRoutes(t *testing.T) {
	srv := secureServer(t, nil, nil)
	k, k2 := entryKey("reported"), entryKey("by-hand")
	anon := authtest.Token{}
	steps := []qstep{
		{"store", "PUT", "entries/{k}", tokWriter, "bad-bytes", 201, "", nil},
		{"store another", "PUT", "entries/{k2}", tokWriter, "other", 201, "", nil},
		{"first report", "POST", "entries/{k}/reports", tokReader, `{"reason":"deserialize failed","client":"c1"}`, 200, "", reportIs(1, 1, false)},
		{"same client again", "POST", "entries/{k}/reports", tokReader, `{"reason":"deserialize failed","client":"c1"}`, 200, "", reportIs(2, 1, false)},
		{"no token", "POST", "entries/{k}/reports", anon, `{"reason":"x"}`, 401, "unauthorized", nil},
		{"no reason", "POST", "entries/{k}/reports", tokReader, `{"client":"c1"}`, 400, "bad_report", nil},
		{"reason too long", "POST", "entries/{k}/reports", tokReader, `{"reason":"` + strings.Repeat("x", 257) + `"}`, 400, "bad_report", nil},
		{"client too long", "POST", "entries/{k}/reports", tokReader, `{"reason":"x","client":"` + strings.Repeat("c", 129) + `"}`, 400, "bad_report", nil},
		{"reason misspelt", "POST", "entries/{k}/reports", tokReader, `{"reasn":"x","client":"c1"}`, 400, "bad_json", nil},
		{"unknown field, strict", "POST", "entries/{k}/reports?field_validation=strict", tokReader, `{"reason":"x","why":1}`, 400, "bad_json", nil},
		{"no such entry", "POST", "entries/" + entryKey("absent") + "/reports", tokReader, `{"reason":"x"}`, 404, "not_found", nil},
		{"reports need admin", "GET", "entries/{k}/reports", tokReader, "", 403, "forbidden", nil},
		{"still served", "GET", "entries/{k}", tokReader, "", 200, "", nil},
		{"second client quarantines", "POST", "entries/{k}/reports", tokReader, `{"reason":"deserialize failed","client":"c2"}`, 200, "", reportIs(3, 2, true)},
		{"GET is a miss", "GET", "entries/{k}", tokReader, "", 404, "not_found", nil},
		{"HEAD is a miss", "HEAD", "entries/{k}", tokReader, "", 404, "", nil},
		{"exists says missing", "POST", "exists", tokReader, `{"keys":["{k}","{k2}"]}`, 200, "", func(t *testing.T, doc []byte) {
			if !strings.Contains(string(doc), `"missing":["`+k+`"]`) {
				t.Fatalf("exists = %s, want %s missing", doc, k)
			}
		}},
		{"batch lists it missing", "POST", "batch", tokReader, `{"keys":["{k}"]}`, 200, "", func(t *testing.T, doc []byte) {
			if !strings.Contains(string(doc), "missing.json") || !strings.Contains(string(doc), k) || strings.Contains(string(doc), "bad-bytes") {
				t.Fatalf("batch = %q, want only missing.json naming %s", doc, k)
			}
		}},
		{"report of a quarantined entry", "POST", "entries/{k}/reports", tokReader, `{"reason":"again","client":"c3"}`, 200, "", reportIs(3, 2, true)},
		{"same bytes stay quarantined", "PUT", "entries/{k}", tokWriter, "bad-bytes", 409, "quarantined", nil},
		{"reports and state", "GET", "entries/{k}/reports", tokAdmin, "", 200, "", func(t *testing.T, doc []byte) {
			var r struct {
				Recent []struct{ Reason, Reporter string } `json:"recent"`
				Cause  string                              `json:"cause"`
				Restor bool                                `json:"restorable"`
			}
			if err := json.Unmarshal(doc, &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Recent) != 3 || r.Recent[0].Reporter != "reader/c1" || r.Recent[2].Reporter != "reader/c2" || r.Cause != "reports" || !r.Restor {
				t.Fatalf("reports = %s", doc)
			}
		}},
		{"list", "GET", "quarantine", tokAdmin, "", 200, "", func(t *testing.T, doc []byte) {
			var r struct {
				Entries []struct {
					Key, Cause, Reason, Writer, SHA256 string
					Reports                            int
					Size                               int64
				}
				Next string
			}
			if err := json.Unmarshal(doc, &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Entries) != 1 || r.Entries[0].Key != k || r.Entries[0].Cause != "reports" || r.Entries[0].Reports != 3 ||
				r.Entries[0].Size != 9 || r.Entries[0].Writer != "ci-writer" || len(r.Entries[0].SHA256) != 64 || r.Next != "" {
				t.Fatalf("list = %s", doc)
			}
		}},
		{"list page of zero", "GET", "quarantine?limit=0", tokAdmin, "", 400, "bad_limit", nil},
		{"list bad cursor", "GET", "quarantine?after=zz", tokAdmin, "", 400, "bad_cursor", nil},
		{"list after the last", "GET", "quarantine?after={k}", tokAdmin, "", 200, "", func(t *testing.T, doc []byte) {
			if !strings.Contains(string(doc), `"entries":[]`) {
				t.Fatalf("list after the only key = %s", doc)
			}
		}},
		{"list needs admin", "GET", "quarantine", tokWriter, "", 403, "forbidden", nil},
		{"restore needs admin", "POST", "entries/{k}/restore", tokWriter, "", 403, "forbidden", nil},
		{"restore", "POST", "entries/{k}/restore", tokAdmin, "", 200, "", func(t *testing.T, doc []byte) {
			if !strings.Contains(string(doc), `"key":"`+k+`"`) {
				t.Fatalf("restore = %s", doc)
			}
		}},
		{"served again", "GET", "entries/{k}", tokReader, "", 200, "", func(t *testing.T, doc []byte) {
			if string(doc) != "bad-bytes" {
				t.Fatalf("GET after restore = %q", doc)
			}
		}},
		{"reports cleared", "POST", "entries/{k}/reports", tokReader, `{"reason":"x","client":"c1"}`, 200, "", reportIs(1, 1, false)},
		{"restore of a live entry", "POST", "entries/{k}/restore", tokAdmin, "", 404, "not_quarantined", nil},
		{"an admin's report quarantines at once", "POST", "entries/{k}/reports", tokAdmin, `{"reason":"x"}`, 200, "", reportIs(2, 2, true)},
		{"different bytes replace it", "PUT", "entries/{k}", tokWriter, "good-bytes", 201, "", nil},
		{"the new bytes are served", "GET", "entries/{k}", tokReader, "", 200, "", func(t *testing.T, doc []byte) {
			if string(doc) != "good-bytes" {
				t.Fatalf("GET after the replacement = %q", doc)
			}
		}},
		{"quarantine by hand", "POST", "entries/{k2}/quarantine", tokAdmin, `{"reason":"bad, checked by hand"}`, 200, "", reportIs(0, 0, true)},
		{"quarantine needs a reason", "POST", "entries/{k2}/quarantine", tokAdmin, `{}`, 400, "bad_report", nil},
		{"quarantine of a miss", "POST", "entries/" + entryKey("absent") + "/quarantine", tokAdmin, `{"reason":"x"}`, 404, "not_found", nil},
		{"quarantine needs admin", "POST", "entries/{k}/quarantine", tokWriter, `{"reason":"x"}`, 403, "forbidden", nil},
	}
	runSteps(t, srv, map[string]string{"{k2}": k2, "{k}": k}, steps)

	metrics := string(apitest.ReadAll(t, srv.Do("GET", srv.URL+"/metrics", nil, bearer(tokReader)...)))
	for series, want := range map[string]float64{
		`cachesvc_entry_reports_total{result="recorded"}`:            3,
		`cachesvc_entry_reports_total{result="quarantined"}`:         2,
		`cachesvc_entry_reports_total{result="already_quarantined"}`: 1,
		`cachesvc_entry_reports_total{result="not_found"}`:           1,
		`cachesvc_quarantined_entries`:                               1,
		`cachesvc_quarantines_total{cause="reports"}`:                1,
		`cachesvc_quarantines_total{cause="admin"}`:                  2,
	} {
		if !strings.Contains(metrics, "\n"+series+" "+strconv.FormatFloat(want, 'f', -1, 64)+"\n") {
			t.Errorf("/metrics has no %s %v", series, want)
		}
	}
}

func TestReportersWithoutAuth(t *testing.T) {
	tests := []struct {
		name    string
		bodies  []string
		want    int // distinct reporters
		quarant bool
	}{
		{"one address, no client id", []string{`{"reason":"x"}`, `{"reason":"x"}`}, 1, false},
		{"client ids", []string{`{"reason":"x","client":"a"}`, `{"reason":"x","client":"b"}`}, 2, true},
		{"one client id", []string{`{"reason":"x","client":"a"}`, `{"reason":"y","client":"a"}`}, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := apitest.Start(t, apitest.Options{})
			k := entryKey(tc.name)
			resp := srv.Do("PUT", srv.EntryURL("default", k), strings.NewReader("v"))
			apitest.ReadAll(t, resp)
			var steps []qstep
			for i, b := range tc.bodies {
				st := qstep{name: b, method: "POST", path: "entries/{k}/reports", body: b, status: 200}
				if i == len(tc.bodies)-1 {
					st.check = reportIs(len(tc.bodies), tc.want, tc.quarant)
				}
				steps = append(steps, st)
			}
			runSteps(t, srv, map[string]string{"{k}": k}, steps)
		})
	}
}

func TestQuarantineAfterBounds(t *testing.T) {
	tests := []struct {
		after   int
		wantErr bool
	}{{0, false}, {1, false}, {64, false}, {65, true}}
	for _, tc := range tests {
		st := apitest.Start(t, apitest.Options{})
		s, err := api.New(api.Config{Store: st.Store, QuarantineAfter: tc.after})
		if err == nil {
			ctx, cancel := contextWithTimeout(5 * time.Second)
			_ = s.Shutdown(ctx)
			cancel()
		}
		if (err != nil) != tc.wantErr {
			t.Errorf("QuarantineAfter %d: err %v, want error %v", tc.after, err, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "1 to 64") {
			t.Errorf("QuarantineAfter %d: error %q does not say what is allowed", tc.after, err)
		}
	}
}

// TestAnonymousReportersAreAddresses: a request without a token (allowed by
// the tokens file's anonymous rule) counts as its client address, whatever
// "client" id its body claims. Counting the claimed id let anyone on the
// network quarantine any entry of an anonymous namespace with two reports.
func TestAnonymousReportersAreAddresses(t *testing.T) {
	srv := secureServer(t, nil, nil)
	k := entryKey("anonymous-reports")
	resp := srv.Do("PUT", srv.EntryURL("public", k), strings.NewReader("v"), bearer(tokAdmin)...)
	if body := apitest.ReadAll(t, resp); resp.StatusCode != 201 {
		t.Fatalf("PUT = %d %s", resp.StatusCode, body)
	}
	for i, client := range []string{"a", "b", "c"} {
		resp := srv.Do("POST", srv.URL+"/v1/public/entries/"+k+"/reports", strings.NewReader(`{"reason":"x","client":"`+client+`"}`), "Content-Type", "application/json")
		doc := apitest.ReadAll(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("report %d = %d %s", i, resp.StatusCode, doc)
		}
		reportIs(i+1, 1, false)(t, doc)
	}
	if resp := srv.Do("GET", srv.EntryURL("public", k), nil); resp.StatusCode != 200 {
		t.Errorf("GET after anonymous reports = %d, want 200", resp.StatusCode)
	}
}
