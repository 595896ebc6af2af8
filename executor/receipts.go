package executor

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"
)

// receiptSink posts receipts to verdictd in the background. Delivery is best effort with a
// bounded queue and a few retries: a receipt only ever feeds prior_state, which is offered to the
// user for confirmation, so a lost receipt costs a question, never a wrong execution. The
// executor's own records stay the authority on what ran.
type receiptSink struct {
	url    string
	token  string
	client *http.Client
	log    *slog.Logger
	queue  chan string
	done   chan struct{}
}

const receiptQueue = 1024

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
		url:    strings.TrimRight(cfg.URL, "/") + "/v1/receipts",
		token:  tok,
		client: &noRedirects,
		log:    log,
		queue:  make(chan string, receiptQueue),
		done:   make(chan struct{}),
	}, nil
}

// refuseRedirect keeps the token and the receipts on verdictd.url. Its /v1/receipts has no
// reason to redirect, and a followed 307 or 308 re-sends the receipt to wherever the answer
// points, with the bearer token whenever the new host is the same or a subdomain, whatever the
// scheme: so an https verdictd redirecting to http would put the token on the wire in clear.
func refuseRedirect(req *http.Request, via []*http.Request) error {
	return fmt.Errorf("refusing redirect to %s: receipts and the verdictd token go to verdictd.url only", req.URL.Redacted())
}

func (k *receiptSink) enqueue(receipt string) {
	select {
	case k.queue <- receipt:
	default:
		k.log.Warn("receipt queue full; receipt not delivered to verdictd")
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

func (k *receiptSink) deliver(ctx context.Context, receipt string) {
	delay := 200 * time.Millisecond
	for attempt := 1; attempt <= 4; attempt++ {
		err := k.post(ctx, receipt)
		if err == nil {
			return
		}
		k.log.Warn("deliver receipt to verdictd", "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay *= 2
	}
}

func (k *receiptSink) post(ctx context.Context, receipt string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, k.url, strings.NewReader(receipt))
	if err != nil {
		return err
	}
	// The body is the compact JWS itself (CONTRACT §2).
	req.Header.Set("Content-Type", "application/jose")
	if k.token != "" {
		req.Header.Set("Authorization", "Bearer "+k.token)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("verdictd answered %s", resp.Status)
	}
	return nil
}
