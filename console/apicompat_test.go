package console

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/verdictgate/verdict/api"
)

// TestReadsAPIApproval: the console reads every member of verdictd's api.Approval that it
// shows, keeping each argument's JSON as sent; a member verdictd adds later is ignored, not an
// error (the contract grows additively).
func TestReadsAPIApproval(t *testing.T) {
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	in := api.Approval{
		ApprovalID: "apr_01", State: api.ApprovalPending, RecordID: "rec_01", Principal: "iss#id1",
		ConversationID: "c1", Server: "bank", Tool: "transfer",
		Arguments:       map[string]any{"to_account": "110-222-333", "amount": json.Number("900.10")},
		ArgumentsDigest: digestA,
		Slots:           []api.ApprovalSlot{{SlotID: "confirm:amount", Question: "Send?", Value: json.Number("900.10")}},
		Drafts:          []api.ApprovalDraft{{Field: "memo", Text: "rent", Digest: digestB, Bytes: 4}},
		Notices:         []string{"Transfers are final."},
		FourEyes:        true, Group: "payments-approvers",
		CreatedAt: at.Format(time.RFC3339), ExpiresAt: at.Add(15 * time.Minute).Format(time.RFC3339),
		DecidedBy: "iss#id2", DecidedAt: at.Add(time.Minute).Format(time.RFC3339Nano), UsedBy: "rec_02",
		UseBy:       at.Add(16 * time.Minute).Format(time.RFC3339Nano),
		WebhookHost: "approvals.example", DecisionReason: "within the daily limit",
		MayDecide: false, Refusal: api.CodeAlreadyDecided,
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var got approval
	if err := jsonv2.Unmarshal(b, &got); err != nil {
		t.Fatalf("the console does not read api.Approval: %v\n%s", err, b)
	}
	if got.ApprovalID != in.ApprovalID || got.State != in.State || got.RecordID != in.RecordID || got.Principal != in.Principal ||
		got.Server != in.Server || got.Tool != in.Tool || got.ArgumentsDigest != in.ArgumentsDigest ||
		!reflect.DeepEqual(got.Notices, in.Notices) || got.FourEyes != in.FourEyes || got.Group != in.Group ||
		!got.CreatedAt.Equal(at) || !got.ExpiresAt.Equal(at.Add(15*time.Minute)) || got.DecidedBy != in.DecidedBy ||
		!got.DecidedAt.Equal(at.Add(time.Minute)) || !got.UseBy.Equal(at.Add(16*time.Minute)) || got.MayDecide != in.MayDecide || got.Refusal != in.Refusal ||
		got.WebhookHost != in.WebhookHost || got.DecisionReason != in.DecisionReason {
		t.Errorf("read %+v\nfrom %s", got, b)
	}
	if string(got.Arguments["amount"]) != "900.10" || string(got.Arguments["to_account"]) != `"110-222-333"` ||
		string(got.Slots[0].Value) != "900.10" || string(got.Drafts[0].Text) != `"rent"` || got.Drafts[0].Bytes != 4 {
		t.Errorf("values not kept as sent: %+v %+v %+v", got.Arguments, got.Slots, got.Drafts)
	}
	// The codes the console puts in words are verdictd's.
	for _, code := range []string{api.CodeUnauthorized, api.CodeSelfApproval, api.CodeApproverNotInGroup, api.CodeChannelNotAllowed,
		api.CodeNotFound, api.CodeAlreadyDecided, api.CodeApprovalValueMismatch, api.CodeApprovalExpired,
		api.CodeStoreUnavailable, api.CodeShuttingDown} {
		if words(code, "g") == words("no_such_code", "g") {
			t.Errorf("code %s has no words of its own", code)
		}
	}
}

// A decision the approval webhook gave names the webhook's host and shows its reason, with
// invisible characters written out.
func TestApprovalPageShowsWebhookDecision(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	a := &approval{ApprovalID: "apr_01", State: api.ApprovalApproved, Server: "bank", Tool: "transfer",
		DecidedBy: "webhook", DecidedAt: at, WebhookHost: "approvals.example", DecisionReason: "within\u202e the limit",
		UseBy: at.Add(15 * time.Minute)}
	var b strings.Builder
	if err := pages["approval"].t.ExecuteTemplate(&b, "layout", page{Title: "t", Body: newApprovalView(a)}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{`<code id="webhook-host">approvals.example</code>`, `id="decision-reason">within⟦U&#43;202E⟧ the limit<`,
		`<dd id="use-by"><time datetime="2026-12-02T06:15:00Z">`} {
		if !strings.Contains(out, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(out, "\u202e") {
		t.Error("the reason's invisible character is on the page as itself")
	}
}
