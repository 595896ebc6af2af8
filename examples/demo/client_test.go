package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/client"
)

// TestClientAgainstTheDaemons walks package client through the whole flow on the real
// daemons: a preflight that asks, the answers, the verdict executed, the receipt posted again,
// both exports read whole, and refusals as typed errors with their codes.
func TestClientAgainstTheDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the whole stack")
	}
	d, err := newDemo(false)
	if err != nil {
		t.Fatal(err)
	}
	startTestStack(t, d)
	ctx := context.Background()
	vd, ex := d.vd, d.ex
	for _, c := range []*client.Client{vd, ex} {
		if err := c.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}

	m, _ := transferRequest("c_client")
	m["new_request"] = true
	b, _ := json.Marshal(m)
	var req api.Request
	if err := apijson.UnmarshalStrict(b, &req); err != nil {
		t.Fatal(err)
	}
	rec, err := vd.Preflight(ctx, &req)
	if err != nil {
		t.Fatal(err)
	}
	req.NewRequest = false
	var answers []api.Answer
	for round := 0; rec.Outcome == api.OutcomeAskUser && round < 6; round++ {
		for _, q := range rec.Questions {
			a := api.Answer{QuestionID: q.QuestionID}
			switch q.Kind {
			case api.QuestionReviewDraft, api.QuestionApproval:
				yes := true
				a.Approved, a.Value = &yes, api.Value{Set: true, V: q.Value}
			default:
				v, ok := user[q.SlotID]
				if !ok {
					t.Fatalf("no scripted answer for %s", q.SlotID)
				}
				a.Value = api.Value{Set: true, V: v}
			}
			answers = append(answers, a)
		}
		if rec, err = vd.Answer(ctx, &req, answers...); err != nil {
			t.Fatal(err)
		}
	}
	if rec.Outcome != api.OutcomeVerdictIssued || rec.Verdict == nil {
		t.Fatalf("outcome %s, want a verdict", rec.Outcome)
	}
	if req.UserAnswers != nil {
		t.Error("Answer changed the request it was given")
	}

	args, _ := json.Marshal(rec.CallArguments)
	ans, err := ex.Execute(ctx, *rec.Verdict, args)
	if err != nil || ans.Execution.Decision != api.ExecutionExecuted || ans.Receipt == "" {
		t.Fatalf("Execute = %+v, %v", ans, err)
	}
	// The executor posts the receipt from its outbox, in the background: this post may come
	// first or second, and either way the baseline is applied exactly once.
	res, err := vd.PostReceipt(ctx, ans.Receipt)
	if err != nil || !res.Accepted || res.RecordID != rec.RecordID ||
		(res.Baseline != "applied" && res.Baseline != "already_applied") {
		t.Errorf("PostReceipt = %+v, %v", res, err)
	}
	res, err = vd.PostReceipt(ctx, ans.Receipt)
	if err != nil || !res.Accepted || res.RecordID != rec.RecordID || res.Baseline != "already_applied" {
		t.Errorf("PostReceipt again = %+v, %v (posted before)", res, err)
	}

	// Refusals: typed, with the envelope's code, and the execution record beside a refused one.
	again, err := ex.Execute(ctx, *rec.Verdict, args)
	if e, ok := errors.AsType[*client.Error](err); !ok || e.Status != 409 || e.Code != "replayed" ||
		again == nil || again.Execution.Decision != api.ExecutionNotExecuted {
		t.Errorf("replay: %+v, %v", again, err)
	}
	noToken, _ := client.New(d.verdictd)
	if _, err := noToken.Preflight(ctx, &req); !isCode(err, 401, "unauthorized") {
		t.Errorf("preflight without a token: %v", err)
	}
	if _, err := vd.PostReceipt(ctx, "not-a-jws"); !isCode(err, 400, "malformed_receipt") && !isCode(err, 400, "malformed") {
		t.Errorf("bad receipt: %v", err)
	}
	if _, err := vd.Record(ctx, "rec_none", false); !isCode(err, 404, "not_found") {
		t.Errorf("missing record: %v", err)
	}

	// Exports, whole: the decision records of this conversation and its one execution.
	var ids []string
	n, err := vd.Records(ctx, client.Query{}, func(line json.RawMessage) error {
		var r api.Record
		if err := apijson.Unmarshal(line, &r); err != nil {
			return err
		}
		ids = append(ids, r.RecordID)
		return nil
	})
	if err != nil || n != len(ids) || !slices.Contains(ids, rec.RecordID) {
		t.Errorf("Records: %d %v, %v", n, ids, err)
	}
	n, err = ex.Executions(ctx, client.Query{VerdictID: *rec.VerdictID}, func(json.RawMessage) error { return nil })
	if err != nil || n != 2 { // executed, then the refused replay
		t.Errorf("Executions: %d, %v", n, err)
	}
	one, err := ex.Execution(ctx, ans.Execution.RecordID)
	var x api.ExecutionRecord
	if err != nil || json.Unmarshal(one, &x) != nil || x.RecordID != ans.Execution.RecordID {
		t.Errorf("execution: %s, %v", one, err)
	}
	masked := 0
	if _, err := ex.Executions(ctx, client.Query{VerdictID: *rec.VerdictID, Mask: true}, func(line json.RawMessage) error {
		var x api.ExecutionRecord
		if err := json.Unmarshal(line, &x); err != nil || x.Verdict != "***" {
			t.Errorf("masked export line: %s", line)
		}
		masked++
		return nil
	}); err != nil || masked != 2 {
		t.Errorf("masked export: %d, %v", masked, err)
	}
	rawRec, err := vd.Record(ctx, rec.RecordID, true)
	var mr api.Record
	if err != nil || apijson.Unmarshal(rawRec, &mr) != nil || mr.Verdict == nil || *mr.Verdict != "***" {
		t.Errorf("masked record: %.200s, %v", rawRec, err)
	}
	if _, err := ex.Executions(ctx, client.Query{ActionKey: "k"}, nil); err == nil {
		t.Error("an executions query by action key was sent")
	}
}

func isCode(err error, status int, code string) bool {
	e, ok := errors.AsType[*client.Error](err)
	return ok && e.Status == status && e.Code == code
}
