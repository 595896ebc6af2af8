package verdictd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/convstate"
)

// errInjected is the failure the fault hook injects.
var errInjected = errors.New("injected fault")

// faults fails the step of a commit it is set to, and keeps the steps it was asked about.
type faults struct {
	mu     sync.Mutex
	failAt string
	seen   []string
}

func (f *faults) hook(step string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, step)
	if step == f.failAt {
		return errInjected
	}
	return nil
}

// set makes the next commits fail at step ("" for none) and forgets the steps seen.
func (f *faults) set(step string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAt, f.seen = step, nil
}

func (f *faults) steps() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen)
}

// dumpFile is every key and value of the service's bbolt file, bucket by bucket.
func dumpFile(t *testing.T, s *Service) string {
	t.Helper()
	var b strings.Builder
	var walk func(path string, bk *bolt.Bucket) error
	walk = func(path string, bk *bolt.Bucket) error {
		return bk.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(path+"/"+string(k), bk.Bucket(k))
			}
			fmt.Fprintf(&b, "%s %q=%q\n", path, k, v)
			return nil
		})
	}
	err := s.db.View(t.Context(), func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error { return walk(string(name), bk) })
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestPreflightCommitFaults: a preflight whose commit fails at any of its steps returns no
// record, no verdict and no question, and leaves the file byte for byte as it was: the call
// that asks (question ids bound, an ask counted, a console approval created) and the answer
// that gets its verdict (the approval closed, used by the record). Each preflight then goes
// through, and its commit takes exactly the steps that were failed, in their order.
func TestPreflightCommitFaults(t *testing.T) {
	const rule = "approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m}"
	f := &faults{}
	e := newEnv(t, envOpts{policy: strings.Replace(consolePolicy, rule, "approval: {channels: [host, console], group: payments-approvers}", 1),
		fault: f.hook})
	steps := []string{convstate.StepState, convstate.StepApproval, convstate.StepRecord, convstate.StepEnd}
	preflight := func(call map[string]any) (*Result, error) {
		t.Helper()
		body, err := json.Marshal(call)
		if err != nil {
			t.Fatal(err)
		}
		return e.svc.Preflight(t.Context(), body)
	}
	call := payCall("u_01", 900)
	var asked record
	for _, tc := range []struct {
		name    string
		answers func() []map[string]any
		outcome string
	}{
		{"ask", func() []map[string]any { return nil }, api.OutcomeAskUser},
		{"verdict", func() []map[string]any {
			var answers []map[string]any
			for _, q := range asked.Questions {
				answers = append(answers, map[string]any{"question_id": q.QuestionID, "approved": true, "value": json.RawMessage(q.Value)})
			}
			return answers
		}, api.OutcomeVerdictIssued},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if answers := tc.answers(); answers != nil {
				call["user_answers"] = answers
			}
			for i, step := range steps {
				before := dumpFile(t, e.svc)
				f.set(step)
				res, err := preflight(call)
				if !errors.Is(err, errInjected) || res != nil {
					t.Fatalf("fault at %s: %v, %+v; want the injected error and no record", step, err, res)
				}
				if got := f.steps(); !slices.Equal(got, steps[:i+1]) {
					t.Fatalf("fault at %s: steps %v, want %v", step, got, steps[:i+1])
				}
				if after := dumpFile(t, e.svc); after != before {
					t.Fatalf("fault at %s changed the file:\nbefore:\n%s\nafter:\n%s", step, before, after)
				}
			}
			f.set("")
			res, err := preflight(call)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.steps(); !slices.Equal(got, steps) {
				t.Fatalf("steps of the commit %v, want %v", got, steps)
			}
			var r record
			if err := json.Unmarshal(res.JSON, &r); err != nil || r.Outcome != tc.outcome {
				t.Fatalf("after the faults: %v %s\n%s", err, r.Outcome, res.JSON)
			}
			stored, err := e.svc.decisions.Get(t.Context(), r.RecordID)
			if err != nil || !bytes.Equal(stored.Record, res.JSON) {
				t.Fatalf("the record as stored: %v\n%s\nwant\n%s", err, stored.Record, res.JSON)
			}
			if tc.outcome == api.OutcomeAskUser {
				if len(r.Questions) == 0 {
					t.Fatalf("no question asked:\n%s", res.JSON)
				}
				asked = r
			}
		})
	}
}
