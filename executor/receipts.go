package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/httpx"
)

// receiptSink posts receipts to verdictd in the background. Delivery is best effort with a
// bounded queue and a few retries: a receipt only ever feeds prior_state, which is offered to the
// user for confirmation, so a lost receipt costs a question, never a wrong execution. The
// executor's own records stay the authority on what ran.
//
// Only a failure that may pass is retried: no answer, a 5xx, 408 or 429. Any other refusal
// (verdictd's 4xx: a receipt it does not accept, a token it does not know) is final, since the
// same receipt sent again gets the same answer; it is logged once, at error level, with
// verdictd's code, which is what an operator fixes the configuration by.
type receiptSink struct {
	url    string
	token  string
	client *http.Client
	log    *slog.Logger
	queue  chan receiptJob
	done   chan struct{}
	// retryDelay is the pause before the second attempt; it doubles after every failure.
	retryDelay time.Duration
}

// receiptJob is one receipt to deliver, and the verdict it reports on, for the log.
type receiptJob struct {
	token     string
	verdictID string
}

const (
	receiptQueue    = 1024
	receiptAttempts = 4
	// maxRefusalBytes bounds how much of a refusal's body is read for its error envelope.
	maxRefusalBytes = 4096
)

// errRedirectRefused marks an answer that redirected the receipt elsewhere: never followed, and
// never retried, since verdictd would redirect it again.
var errRedirectRefused = errors.New("redirect refused")

func newReceiptSink(cfg ReceiptSink, client *http.Client, log *slog.Logger) (*receiptSink, error) {
	tok := cfg.Token
	if cfg.TokenFile != "" {
		b, err := os.ReadFile(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("verdictd.token_file: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	// A copy, so that the caller's client keeps its own redirect policy.
	noRedirects := *client
	noRedirects.CheckRedirect = refuseRedirect
	return &receiptSink{
		url:        strings.TrimRight(cfg.URL, "/") + "/v1/receipts",
		token:      tok,
		client:     &noRedirects,
		log:        log,
		queue:      make(chan receiptJob, receiptQueue),
		done:       make(chan struct{}),
		retryDelay: 200 * time.Millisecond,
	}, nil
}

// refuseRedirect keeps the token and the receipts on verdictd.url. Its /v1/receipts has no
// reason to redirect, and a followed 307 or 308 re-sends the receipt to wherever the answer
// points, with the bearer token whenever the new host is the same or a subdomain, whatever the
// scheme: so an https verdictd redirecting to http would put the token on the wire in clear.
func refuseRedirect(req *http.Request, via []*http.Request) error {
	return fmt.Errorf("%w: refusing redirect to %s: receipts and the verdictd token go to verdictd.url only",
		errRedirectRefused, req.URL.Redacted())
}

func (k *receiptSink) enqueue(receipt, verdictID string) {
	select {
	case k.queue <- receiptJob{token: receipt, verdictID: verdictID}:
	default:
		k.log.Warn("receipt queue full; receipt not delivered to verdictd", "verdict_id", verdictID)
	}
}

func (k *receiptSink) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.done:
			return
		case r := <-k.queue:
			k.deliver(ctx, r)
		}
	}
}

func (k *receiptSink) close() {
	select {
	case <-k.done:
	default:
		close(k.done)
	}
}

func (k *receiptSink) deliver(ctx context.Context, job receiptJob) {
	delay := k.retryDelay
	for attempt := 1; ; attempt++ {
		err := k.post(ctx, job.token)
		if err == nil {
			return
		}
		attrs := []any{"verdict_id", job.verdictID, "attempt", attempt}
		var refusal *httpx.Error
		if errors.As(err, &refusal) {
			attrs = append(attrs, "status", refusal.Status, "code", refusal.Code, "message", refusal.Message)
		} else {
			attrs = append(attrs, "error", err.Error())
		}
		switch {
		case refusal != nil && refusal.Final():
			k.log.Error("verdictd refused the receipt; not retried", attrs...)
			return
		case errors.Is(err, errRedirectRefused):
			k.log.Error("verdictd redirected the receipt; not followed, not retried", attrs...)
			return
		case attempt == receiptAttempts || ctx.Err() != nil:
			k.log.Error("receipt not delivered to verdictd", attrs...)
			return
		}
		k.log.Warn("deliver receipt to verdictd; retrying", append(attrs, "retry_in", delay)...)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay *= 2
	}
}

// post sends one receipt. A refusal is an *httpx.Error carrying verdictd's status, code and
// message.
func (k *receiptSink) post(ctx context.Context, receipt string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, k.url, strings.NewReader(receipt))
	if err != nil {
		return err
	}
	// The body is the compact JWS itself (docs/api.md).
	req.Header.Set("Content-Type", "application/jose")
	if k.token != "" {
		req.Header.Set("Authorization", "Bearer "+k.token)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxRefusalBytes))
	return httpx.ReadError(resp.StatusCode, body)
}
