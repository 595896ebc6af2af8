package verdictd

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/store"
)

// updateGolden rewrites the golden file of TestDecisionRecordsGolden from this run.
var updateGolden = flag.Bool("update", false, "rewrite testdata/records/*.golden from this run")

// signedToken matches a compact JWS: a verdict, signed with this run's fresh key.
var signedToken = regexp.MustCompile(`eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*`)

// TestDecisionRecordsGolden holds the decision records verdictd writes, byte for byte, to
// testdata/records/decisions.golden: as each preflight answers it, as the admin API exports it
// (whole, masked, by id) and as the store holds it. The ids a run makes afresh (record,
// question and verdict ids) and the signed verdict are named in the order they first appear;
// everything else, times of the service's clock included, is compared as it is.
func TestDecisionRecordsGolden(t *testing.T) {
	var mu sync.Mutex
	at := time.Date(2031, 3, 4, 5, 6, 7, 890123456, time.FixedZone("UTC+9", 9*3600))
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
	advance := func() {
		mu.Lock()
		defer mu.Unlock()
		at = at.Add(time.Second)
	}
	e := newEnv(t, envOpts{now: clock})

	var out bytes.Buffer
	var subst [][2]string
	count := map[string]int{}
	tokens := map[string]string{}
	name := func(kind, v string) {
		if v == "" {
			return
		}
		for _, s := range subst {
			if s[0] == v {
				return
			}
		}
		count[kind]++
		subst = append(subst, [2]string{v, fmt.Sprintf("<%s %d>", kind, count[kind])})
	}
	stable := func(b []byte) []byte {
		for _, s := range subst {
			b = bytes.ReplaceAll(b, []byte(s[0]), []byte(s[1]))
		}
		return signedToken.ReplaceAllFunc(b, func(m []byte) []byte {
			if _, ok := tokens[string(m)]; !ok {
				tokens[string(m)] = fmt.Sprintf("<jws %d>", len(tokens)+1)
			}
			return []byte(tokens[string(m)])
		})
	}
	add := func(heading string, b []byte) {
		fmt.Fprintf(&out, "== %s\n%s\n", stable([]byte(heading)), bytes.TrimRight(stable(b), "\n"))
	}
	var ids []string
	preflight := func(heading string, req map[string]any) *record {
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		status, answer := do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", body)
		var r record
		if err := json.Unmarshal(answer, &r); err != nil {
			t.Fatalf("%s: %d %s: %v", heading, status, answer, err)
		}
		r.raw = answer
		name("rec", r.RecordID)
		for _, q := range r.Questions {
			name("q", q.QuestionID)
		}
		if r.VerdictID != nil {
			name("jti", *r.VerdictID)
		}
		ids = append(ids, r.RecordID)
		add(fmt.Sprintf("%s: POST /v1/preflight %d", heading, status), answer)
		advance()
		return &r
	}

	r1 := preflight("ask", landlord())
	q := r1.question("to_account")
	preflight("rejected answer", landlord(map[string]any{"question_id": q.QuestionID, "value": "no such account <&>\u2028"}))
	r2 := preflight("confirm", landlord(map[string]any{"question_id": q.QuestionID, "value": "110-222-333"}))
	approve := r2.question("confirm_transfer")
	var v any
	if err := json.Unmarshal(approve.Value, &v); err != nil {
		t.Fatal(err)
	}
	preflight("verdict", landlord(
		map[string]any{"question_id": q.QuestionID, "value": "110-222-333"},
		map[string]any{"question_id": approve.QuestionID, "approved": true, "value": v},
	))
	read := landlord()
	read["tool"], read["candidates"] = "get_balance", []map[string]any{}
	preflight("read tool", read)
	unknown := landlord()
	unknown["tool"] = "drain_account"
	preflight("unknown tool", unknown)

	get := func(path string) {
		status, b := do(t, "GET", e.srv.URL+path, adminToken, "", nil)
		add(fmt.Sprintf("GET %s %d", path, status), b)
	}
	get("/v1/records")
	get("/v1/records?mask=1")
	for _, id := range ids {
		if id != "" {
			get("/v1/records/" + id)
		}
	}
	var stored []string
	err := e.svc.decisions.Since(context.Background(), time.Time{}, func(d *store.Decision) error {
		stored = append(stored, fmt.Sprintf("%s %s %s %s %s", d.RecordID, d.ActionKey, d.Outcome, d.VerdictID,
			d.Time.Format(time.RFC3339Nano))+"\n"+string(d.Record))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	add("stored", []byte(strings.Join(stored, "\n")))

	path := filepath.Join("testdata", "records", "decisions.golden")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestDecisionRecordsGolden -update writes it)", err)
	}
	if !bytes.Equal(want, out.Bytes()) {
		got, wantLines := strings.Split(out.String(), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(got), len(wantLines)) {
			var a, b string
			if i < len(got) {
				a = got[i]
			}
			if i < len(wantLines) {
				b = wantLines[i]
			}
			if a != b {
				t.Fatalf("%s differs at line %d:\ngot  %q\nwant %q", path, i+1, a, b)
			}
		}
	}
}
