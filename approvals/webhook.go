package approvals

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sync"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/policy"
)

// Webhook approvals (docs/approvals.md): a pending approval of a tool whose rule names the
// webhook channel is posted, after the commit of the record that created it, to the rule's
// webhook, and its answer is decided through the same path as an approver's POST. Nothing of
// it runs under the conversation's lock or delays the preflight: the approval is handed to a
// bounded pool, and an approval the pool has no room for stays pending for the console or
// expires.

// Defaults and bounds of approval_webhooks (Options.WebhookInFlight, Options.WebhookQueue).
const (
	DefaultWebhookInFlight = 4
	MaxWebhookInFlight     = 64
	DefaultWebhookQueue    = 256
	MaxWebhookQueue        = 4096
)

// maxWebhookReply bounds the body of a webhook's answer: a decision, a digest and a reason.
const maxWebhookReply = 64 << 10

// Results of one approval webhook request, the label of verdictd_approval_webhook_total.
const (
	webhookApprove = "approve" // it approved, and the decision was recorded
	webhookDeny    = "deny"    // it denied, and the decision was recorded
	webhookFailed  = "failed"  // no decision: transport, status, timeout, malformed or oversized answer, or another digest
	webhookIgnored = "ignored" // a well-formed answer for an approval decided, expired or no longer the webhook's meanwhile
	webhookDropped = "dropped" // the queue was full: the approval was not posted
)

// errWebhook is the cause of every webhook answer that decides nothing.
var errWebhook = errors.New("approval webhook")

// webhookPool posts pending approvals to their webhook: at most inFlight requests at once,
// at most cap(queue) approvals waiting for one.
type webhookPool struct {
	queue  chan string // approval ids
	client *http.Client
	stop   context.CancelFunc
	wg     sync.WaitGroup
	// done, when set (Options.WebhookResult), is told each request's result once it is counted.
	done func(approvalID, result string)
}

// startWebhooks starts the pool's workers; Close stops them.
func (s *Service) startWebhooks(base *http.Client, inFlight, queue int, done func(approvalID, result string)) {
	c := http.Client{}
	if base != nil {
		c = *base
	}
	// A redirect is not an answer: the webhook is the URL the policy names, nothing else.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	ctx, stop := context.WithCancel(context.Background())
	p := &webhookPool{queue: make(chan string, cmp.Or(queue, DefaultWebhookQueue)), client: &c, stop: stop, done: done}
	s.webhooks = p
	for range cmp.Or(inFlight, DefaultWebhookInFlight) {
		p.wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case id := <-p.queue:
					s.webhookResult(id, s.askWebhook(ctx, id))
				}
			}
		})
	}
}

// Close stops the webhook requests, and waits for them to end.
func (s *Service) Close() {
	s.webhooks.stop()
	s.webhooks.wg.Wait()
}

// enqueueWebhook hands a new pending approval to the pool, never waiting: when the queue is
// full it is counted dropped and stays pending.
func (s *Service) enqueueWebhook(id string) {
	select {
	case s.webhooks.queue <- id:
	default:
		s.log.Warn("approval webhook queue full: the approval stays pending", "approval_id", id)
		s.webhookResult(id, webhookDropped)
	}
}

func (s *Service) webhookResult(id, result string) {
	if result == "" {
		return
	}
	s.hooks.WithLabelValues(result).Inc()
	if s.webhooks.done != nil {
		s.webhooks.done(id, result)
	}
}

// askWebhook posts approval id to the webhook of its tool's rule in force and decides it on
// the answer. It returns the result to count, "" when nothing was asked (the approval was
// decided or expired while it waited, or its tool no longer takes webhook approvals).
func (s *Service) askWebhook(ctx context.Context, id string) string {
	b, err := s.keeper.Get(ctx, id)
	if err != nil || b == nil {
		if ctx.Err() == nil {
			s.log.Error("approval webhook: read the approval", "approval_id", id, "error", fmt.Sprint(err))
		}
		return ""
	}
	a, err := decodeApproval(b)
	if err != nil {
		s.log.Error("approval webhook", "approval_id", id, "error", err.Error())
		return ""
	}
	rule := s.ruleNow(a)
	if a.effectiveState(s.now()) != api.ApprovalPending || !rule.Allows(policy.ChannelWebhook) ||
		!slices.Contains(a.Channels, string(policy.ChannelWebhook)) {
		return ""
	}
	u, err := url.Parse(rule.Webhook)
	if err != nil {
		return webhookFailed // the loader checked it: unreachable
	}
	// One delivery per approval across the replicas sharing the keeper, claimed for as long
	// as any approval may stay pending.
	switch won, err := s.keeper.Claim(ctx, "webhook/"+id, policy.MaxApprovalTimeout); {
	case err != nil:
		if ctx.Err() == nil {
			s.log.Warn("approval webhook: claim the delivery: the approval stays pending", "approval_id", id, "error", err.Error())
		}
		return webhookFailed
	case !won:
		return "" // another replica posts it
	}
	d, err := s.postApproval(ctx, rule, s.view(a, &Viewer{}, s.now()))
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("approval webhook answered no decision: the approval stays pending",
				"approval_id", id, "webhook_host", u.Host, "error", err.Error())
		}
		return webhookFailed
	}
	req := api.DecisionRequest{Decision: d.Decision, ArgumentsDigest: d.ArgumentsDigest}
	_, err = s.decide(ctx, a, decider{webhookHost: u.Host, reason: d.Reason}, req)
	var refused *httpx.Error
	switch {
	case err == nil && d.Decision == api.DecisionApprove:
		return webhookApprove
	case err == nil:
		return webhookDeny
	case errors.As(err, &refused) && refused.Code == api.CodeApprovalValueMismatch:
		s.log.Warn("approval webhook decided other values: nothing decided", "approval_id", id, "webhook_host", u.Host)
		return webhookFailed
	case errors.As(err, &refused) && refused.Status != http.StatusServiceUnavailable:
		// Decided in the console, expired or no longer the webhook's meanwhile.
		s.log.Info("approval webhook decision ignored", "approval_id", id, "webhook_host", u.Host, "code", refused.Code)
		return webhookIgnored
	default:
		return webhookFailed
	}
}

// postApproval posts approval to rule's webhook and reads its decision strictly: status 200,
// a JSON body of at most maxWebhookReply bytes that is exactly a WebhookDecision (no other
// member, no duplicate), approve or deny, a digest, a reason of at most MaxDecisionReason
// bytes. Anything else is an error wrapping errWebhook.
func (s *Service) postApproval(ctx context.Context, rule policy.ApprovalRule, approval api.Approval) (*api.WebhookDecision, error) {
	body, err := json.Marshal(approval)
	if err != nil {
		return nil, fmt.Errorf("%w: encode the approval: %w", errWebhook, err)
	}
	ctx, cancel := context.WithTimeout(ctx, rule.WebhookTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, rule.Webhook, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errWebhook, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	resp, err := s.webhooks.client.Do(hr)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // without the URL, whose query may carry a secret
		}
		return nil, fmt.Errorf("%w: %w", errWebhook, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: answered %d", errWebhook, resp.StatusCode)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, fmt.Errorf("%w: content type %q, want application/json", errWebhook, resp.Header.Get("Content-Type"))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxWebhookReply+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read the answer: %w", errWebhook, err)
	}
	if len(raw) > maxWebhookReply {
		return nil, fmt.Errorf("%w: the answer exceeds %d bytes", errWebhook, maxWebhookReply)
	}
	return readWebhookDecision(raw)
}

// readWebhookDecision reads a webhook's answer strictly: exactly the members of a
// WebhookDecision, each once and spelled exactly (a duplicate could say both, and a reader
// that folds case would read another member), approve or deny, a digest, a reason of at most
// MaxDecisionReason bytes.
func readWebhookDecision(raw []byte) (*api.WebhookDecision, error) {
	var d api.WebhookDecision
	if err := apijson.UnmarshalStrict(raw, &d); err != nil {
		return nil, fmt.Errorf("%w: %w", errWebhook, err)
	}
	switch {
	case d.Decision != api.DecisionApprove && d.Decision != api.DecisionDeny:
		return nil, fmt.Errorf("%w: decision %q, want approve or deny", errWebhook, d.Decision)
	case d.ArgumentsDigest == "":
		return nil, fmt.Errorf("%w: no arguments_digest", errWebhook)
	case len(d.Reason) > api.MaxDecisionReason:
		return nil, fmt.Errorf("%w: reason exceeds %d bytes", errWebhook, api.MaxDecisionReason)
	}
	return &d, nil
}
