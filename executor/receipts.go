package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/plainhttp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/opfile"
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
//
// Receipts go in batches (POST /v1/receipts/batch): the first one queued waits up to batchDelay
// for others, and up to api.MaxReceiptBatch go in one exchange, each answered on its own. A
// batch of one goes alone to POST /v1/receipts, and so does every receipt once a verdictd
// answered that it has no batch endpoint (404 or 405: an older version).
type receiptSink struct {
	url    string
	token  string
	client *http.Client
	log    *slog.Logger
	queue  chan receiptJob
	done   chan struct{}
	// retryDelay is the pause before the second attempt; it doubles after every failure.
	retryDelay time.Duration
	batchDelay time.Duration
	// flushTime bounds deliveries once the sink is told to stop.
	flushTime time.Duration
	// oneByOneUntil is set, by the goroutine that runs the sink, when verdictd answered that it
	// has no batch endpoint: until then receipts are posted one by one.
	oneByOneUntil time.Time
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
	// maxBatchAnswerBytes bounds verdictd's answer to a batch: a full batch of items, each with
	// an error message, is well under it.
	maxBatchAnswerBytes = 1 << 20
	// receiptOneByOneFor is how long receipts go one by one after verdictd answered that it has
	// no batch endpoint, before a batch is tried again.
	receiptOneByOneFor = 10 * time.Minute
	// receiptTimeout bounds one exchange with verdictd.
	receiptTimeout = 10 * time.Second
	// receiptFlushTime bounds the delivery of what is left when the sink stops.
	receiptFlushTime = 2 * time.Second
)

// errRedirectRefused marks an answer that redirected the receipt elsewhere: never followed, and
// never retried, since verdictd would redirect it again.
var errRedirectRefused = errors.New("redirect refused")

func newReceiptSink(cfg ReceiptSink, client *http.Client, log *slog.Logger) (*receiptSink, error) {
	tok := cfg.Token
	if cfg.TokenFile != "" {
		b, err := opfile.ReadFile(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("verdictd.token_file: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	if client == nil {
		// Each exchange is bounded by receiptTimeout through its context, not by a Timeout
		// here: with one, http.Client would run a goroutine per request for any transport but
		// its own, and the receipts to a plain http verdictd go on the sink's goroutine.
		client = &http.Client{Transport: plainhttp.NewTransport(http.DefaultTransport)}
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
		batchDelay: cfg.batchDelay(),
		flushTime:  receiptFlushTime,
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
	// Deliveries outlive ctx by flushTime: a batch under way when the executor stops is not cut
	// off, and what is left is flushed, without holding the shutdown on a verdictd that does
	// not answer.
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(k.flushTime, cancel) })
	defer stop()
	for {
		select {
		case <-ctx.Done():
			k.flush(dctx, nil)
			return
		case <-k.done:
			k.flush(dctx, nil)
			return
		case r := <-k.queue:
			b := k.gather(ctx, r)
			if ctx.Err() != nil || k.closed() {
				k.flush(dctx, b)
				return
			}
			k.deliverBatch(dctx, b)
		}
	}
}

func (k *receiptSink) closed() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// flush delivers, when the sink stops, the batch it was gathering and what is queued, within
// flushTime, and says how many it could not: receipts signed for the last calls are not left waiting out batch_delay.
func (k *receiptSink) flush(ctx context.Context, batch []receiptJob) {
	ctx, cancel := context.WithTimeout(ctx, k.flushTime)
	defer cancel()
	for ctx.Err() == nil {
		if batch = k.queued(batch); len(batch) == 0 {
			return
		}
		k.deliverBatch(ctx, batch)
		batch = nil
	}
	if n := len(batch) + len(k.queue); n > 0 {
		k.log.Warn("receipts not delivered to verdictd at shutdown", "count", n)
	}
}

// gather returns first and the receipts queued after it within batchDelay, at most
// api.MaxReceiptBatch in all. With no delay it takes only what is queued already.
func (k *receiptSink) gather(ctx context.Context, first receiptJob) []receiptJob {
	batch := []receiptJob{first}
	if k.batchDelay <= 0 {
		return k.queued(batch)
	}
	t := time.NewTimer(k.batchDelay)
	defer t.Stop()
	for len(batch) < api.MaxReceiptBatch {
		select {
		case r := <-k.queue:
			batch = append(batch, r)
		case <-t.C:
			return batch
		case <-k.done:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// queued adds to batch what is queued now, up to api.MaxReceiptBatch receipts in all.
func (k *receiptSink) queued(batch []receiptJob) []receiptJob {
	for len(batch) < api.MaxReceiptBatch {
		select {
		case r := <-k.queue:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// deliverBatch delivers batch: in one exchange when it holds more than one receipt and verdictd
// has the batch endpoint, with the single post's retry rules applied to each receipt.
func (k *receiptSink) deliverBatch(ctx context.Context, batch []receiptJob) {
	if len(batch) == 1 || time.Now().Before(k.oneByOneUntil) {
		for _, job := range batch {
			k.deliver(ctx, job, 1)
		}
		return
	}
	delay := k.retryDelay
	for attempt := 1; ; attempt++ {
		items, err := k.postBatch(ctx, batch)
		var refusal *httpx.Error
		switch {
		case errors.As(err, &refusal) && (refusal.Status == http.StatusNotFound || refusal.Status == http.StatusMethodNotAllowed):
			// An older verdictd, or something in front of it that knows no such path: posted one
			// by one, and the batch endpoint tried again after a while.
			k.log.Warn("verdictd has no batch endpoint for receipts; posting them one by one for a while",
				"status", refusal.Status, "retry_batches_in", receiptOneByOneFor)
			k.oneByOneUntil = time.Now().Add(receiptOneByOneFor)
			for _, job := range batch {
				k.deliver(ctx, job, attempt)
			}
			return
		case refusal != nil && refusal.Final() && refusal.Status != http.StatusUnauthorized && refusal.Status != http.StatusForbidden:
			// Refused whole (one bad receipt, or a proxy's limit on the batch's size or type),
			// so nothing of it was applied: each receipt gets the answer it gets alone.
			for _, job := range batch {
				k.deliver(ctx, job, attempt)
			}
			return
		}
		var retry []receiptJob
		for i, job := range batch {
			jobErr := err
			if err == nil {
				if items[i].Status/100 == 2 {
					continue
				}
				jobErr = &httpx.Error{Status: items[i].Status}
				if e := items[i].Error; e != nil {
					jobErr = &httpx.Error{Status: items[i].Status, Code: e.Code, Message: e.Message}
				}
			}
			if k.again(ctx, job, attempt, delay, jobErr) {
				retry = append(retry, job)
			}
		}
		if len(retry) == 0 || !pause(ctx, delay) {
			return
		}
		delay *= 2
		batch = retry
	}
}

// again logs a receipt's failed attempt and reports whether it is tried again: not after a
// final refusal or a redirect, after the last attempt, or once ctx ended.
func (k *receiptSink) again(ctx context.Context, job receiptJob, attempt int, delay time.Duration, err error) bool {
	attrs := []any{"verdict_id", job.verdictID, "attempt", attempt}
	refusal, ok := errors.AsType[*httpx.Error](err)
	if ok {
		attrs = append(attrs, "status", refusal.Status, "code", refusal.Code, "message", refusal.Message)
	} else {
		attrs = append(attrs, "error", err.Error())
	}
	switch {
	case refusal != nil && refusal.Final():
		k.log.Error("verdictd refused the receipt; not retried", attrs...)
		return false
	case errors.Is(err, errRedirectRefused):
		k.log.Error("verdictd redirected the receipt; not followed, not retried", attrs...)
		return false
	case attempt == receiptAttempts || ctx.Err() != nil:
		k.log.Error("receipt not delivered to verdictd", attrs...)
		return false
	}
	k.log.Warn("deliver receipt to verdictd; retrying", append(attrs, "retry_in", delay)...)
	return true
}

func (k *receiptSink) close() {
	select {
	case <-k.done:
	default:
		close(k.done)
	}
}

// deliver posts one receipt alone from its attempt first on, trying again while the failure may
// pass.
func (k *receiptSink) deliver(ctx context.Context, job receiptJob, first int) {
	delay := k.retryDelay << (first - 1)
	for attempt := first; ; attempt++ {
		err := k.post(ctx, job.token)
		if err == nil || !k.again(ctx, job, attempt, delay, err) || !pause(ctx, delay) {
			return
		}
		delay *= 2
	}
}

// pause waits d, or until ctx ends; it reports whether d passed.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// postBatch sends batch to the batch endpoint and returns one item per receipt. An answer other
// than 200 with exactly one item per receipt is an error; a refusal of the whole batch is an
// *httpx.Error.
func (k *receiptSink) postBatch(ctx context.Context, batch []receiptJob) ([]api.ReceiptItem, error) {
	ctx, cancel := context.WithTimeout(ctx, receiptTimeout)
	defer cancel()
	body := api.ReceiptBatch{Receipts: make([]string, len(batch))}
	for i, job := range batch {
		body.Receipts[i] = job.token
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	resp, err := k.send(ctx, k.url+"/batch", "application/json", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxBatchAnswerBytes+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, httpx.ReadError(resp.StatusCode, out[:min(len(out), maxRefusalBytes)])
	}
	var ans api.ReceiptBatchResult
	if len(out) > maxBatchAnswerBytes {
		return nil, errors.New("verdictd's answer to a receipt batch is too large")
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		return nil, fmt.Errorf("verdictd's answer to a receipt batch: %w", err)
	}
	if len(ans.Results) != len(batch) {
		return nil, fmt.Errorf("verdictd answered %d items for a batch of %d receipts", len(ans.Results), len(batch))
	}
	for i, it := range ans.Results {
		// An item that says neither what was done nor what was refused is no answer.
		if it.Status < 200 || it.Status > 599 || it.Status/100 == 2 && it.Result == nil || it.Status/100 != 2 && it.Error == nil {
			return nil, fmt.Errorf("verdictd's answer to a receipt batch: item %d (status %d) is malformed", i, it.Status)
		}
	}
	return ans.Results, nil
}

// post sends one receipt. A refusal is an *httpx.Error carrying verdictd's status, code and
// message.
func (k *receiptSink) post(ctx context.Context, receipt string) error {
	ctx, cancel := context.WithTimeout(ctx, receiptTimeout)
	defer cancel()
	// The body is the compact JWS itself (docs/api.md).
	resp, err := k.send(ctx, k.url, "application/jose", strings.NewReader(receipt))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxRefusalBytes))
	if resp.StatusCode/100 == 2 {
		// Read to its end, so that the connection carries the next receipt: an answer closed
		// unread makes net/http drop the connection, and every receipt would dial anew.
		return nil
	}
	return httpx.ReadError(resp.StatusCode, body)
}

// send posts body, of contentType, to url with the verdictd token.
func (k *receiptSink) send(ctx context.Context, url, contentType string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	if k.token != "" {
		req.Header.Set("Authorization", "Bearer "+k.token)
	}
	return k.client.Do(req)
}
