package mcpgate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/visible"
)

// approvalPoll is how long one long poll of verdictd's approval waits (its maximum is 60s):
// a decision answers it at once, so this only bounds each request.
const approvalPoll = 30 * time.Second

// consoleApproval returns the pending console approval of rec when its approvals must be
// given in the console: the tool takes none in the host, or the host cannot be asked with a
// form. Nil when the host's form can settle them.
func consoleApproval(rec *api.Record, hostForms bool) *api.RecordApproval {
	ra := rec.Approval
	if ra == nil || ra.ApprovalID == "" || ra.State != api.ApprovalPending {
		return nil
	}
	if hostForms && slices.Contains(ra.Channels, string(policy.ChannelHost)) {
		return nil
	}
	return ra
}

// hostQuestions is rec without the approval questions the host cannot answer, when its
// approvals are given in the console: the host still answers the rest (a draft's review, a
// checklist confirmation) in its form.
func hostQuestions(rec *api.Record) *api.Record {
	out := *rec
	out.Questions = nil
	for _, q := range rec.Questions {
		if q.Kind != api.QuestionApproval {
			out.Questions = append(out.Questions, q)
		}
	}
	return &out
}

// urlElicitation reports whether the host of ss declared URL-mode elicitation and can be
// asked in place.
func urlElicitation(ss *mcp.ServerSession) bool {
	ip := ss.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil && ip.Capabilities.Elicitation.URL != nil
}

// approvalOpening starts every approval message: the gateway's own wording,
// which a relayed question may not use (see reservedWording).
const approvalOpening = "This request must be approved"

// approvalMessage says what is to be approved, and where.
func approvalMessage(rec *api.Record, ra *api.RecordApproval, where string) string {
	var b strings.Builder
	b.WriteString(approvalOpening)
	if ra.DecidedBy == "" && !slices.Contains(ra.Channels, string(policy.ChannelHost)) {
		if slices.Contains(ra.Channels, string(policy.ChannelConsole)) {
			b.WriteString(" by an approver of your organisation")
		} else {
			b.WriteString(" by your organisation's approval system")
		}
	}
	b.WriteString(" before it runs")
	for _, q := range rec.Questions {
		if q.Kind == api.QuestionApproval && q.Message != "" {
			b.WriteString(" (")
			b.WriteString(visible.Line(strings.TrimRight(q.Message, ". ")))
			b.WriteString(")")
			break
		}
	}
	b.WriteString(". ")
	b.WriteString(where)
	return b.String()
}

// awaitConsole settles a call whose approvals are given in the console. A host that declared
// URL elicitation is sent to the approval's page (elicitation/create, mode url), and the
// gateway waits on verdictd for the decision, then reports the elicitation complete: done
// reports that the call goes on to the next preflight, which reads the decision. Any other
// host, a declined elicitation or an approval that expires ends the call here with res.
func (g *Gateway) awaitConsole(ctx context.Context, h host, rec *api.Record, ra *api.RecordApproval) (res *mcp.CallToolResult, done bool) {
	if !slices.Contains(ra.Channels, string(policy.ChannelConsole)) {
		return g.awaitWebhook(ctx, rec, ra)
	}
	meta := []any{api.MetaRecordID, rec.RecordID, api.MetaOutcome, rec.Outcome}
	if g.cfg.ConsoleURL == "" {
		g.log.Warn("approval pending in the console, but console_url is not set", "record_id", rec.RecordID, "approval_id", ra.ApprovalID)
		return toolError(api.ReasonApprovalPendingElsewhere, approvalMessage(rec, ra,
			"Ask an approver to approve it, then make the request again.")+nothingDone, meta...), false
	}
	url := strings.TrimRight(g.cfg.ConsoleURL, "/") + "/approvals/" + ra.ApprovalID // the approval's page
	approveThere := toolError(api.ReasonApprovalPendingElsewhere, approvalMessage(rec, ra,
		"It can be approved at "+url+"; once it is, make the request again.")+nothingDone, meta...)
	if !h.urlInPlace() {
		return approveThere, false
	}
	er, err := h.ss.Elicit(ctx, &mcp.ElicitParams{Mode: "url", ElicitationID: ra.ApprovalID, URL: url,
		Message: approvalMessage(rec, ra, "Open the approval page to have it approved; this request waits for the decision.")})
	if err != nil {
		g.log.Warn("url elicitation", "record_id", rec.RecordID, "error", err.Error())
		return approveThere, false
	}
	if er.Action != "accept" {
		return toolError(api.ReasonDeclined, "You did not open the approval."+nothingDone, meta...), false
	}
	a, err := g.waitApproval(ctx, ra.ApprovalID)
	if err != nil {
		g.log.Warn("waiting for an approval", "approval_id", ra.ApprovalID, "error", err.Error())
		return approveThere, false
	}
	if err := h.ss.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: ra.ApprovalID}); err != nil {
		g.log.Warn("elicitation complete", "approval_id", ra.ApprovalID, "error", err.Error())
	}
	if a.State == api.ApprovalExpired {
		return toolError(api.ReasonApprovalTimeout, "The request was not approved in time."+nothingDone, meta...), false
	}
	// Approved or denied: the next preflight acts on the decision.
	return nil, true
}

// awaitWebhook settles a call whose approval only the tool's approval webhook gives: nobody
// is sent anywhere. verdictd asks the webhook once the approval is created, so the gateway
// waits one long poll for its decision; an approval still pending then (the webhook did not
// answer, or answered nothing that decides) ends the call approval_pending_elsewhere, to be
// made again, rather than holding the host's request until the approval expires.
func (g *Gateway) awaitWebhook(ctx context.Context, rec *api.Record, ra *api.RecordApproval) (res *mcp.CallToolResult, done bool) {
	meta := []any{api.MetaRecordID, rec.RecordID, api.MetaOutcome, rec.Outcome}
	a, err := g.verdictd.api.Approval(ctx, ra.ApprovalID, approvalPoll)
	switch {
	case err != nil:
		g.log.Warn("waiting for a webhook approval", "approval_id", ra.ApprovalID, "error", err.Error())
		fallthrough
	case a.State == api.ApprovalPending:
		return toolError(api.ReasonApprovalPendingElsewhere, approvalMessage(rec, ra,
			"The organisation's approval system has not decided it yet; make the request again later.")+nothingDone, meta...), false
	case a.State == api.ApprovalExpired:
		return toolError(api.ReasonApprovalTimeout, "The request was not approved in time."+nothingDone, meta...), false
	}
	// Approved or denied: the next preflight acts on the decision.
	return nil, true
}

// errApprovalWait: the call's context ended while it waited for an approval.
var errApprovalWait = errors.New("the request ended before the approval was decided")

// waitApproval long-polls verdictd until the approval is no longer pending, forwarding the
// host's own token like every call the gateway makes for it.
func (g *Gateway) waitApproval(ctx context.Context, id string) (*api.Approval, error) {
	for {
		a, err := g.verdictd.api.Approval(ctx, id, approvalPoll)
		if err != nil {
			return nil, fmt.Errorf("verdictd: %w", err)
		}
		if a.State != api.ApprovalPending {
			return a, nil
		}
		if ctx.Err() != nil {
			return nil, errApprovalWait
		}
	}
}
