package verdictd

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/convstate"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/verdict"
)

func (s *Service) handleReceipt(w http.ResponseWriter, r *http.Request) {
	body, err := httpx.ReadBody(w, r, verdict.MaxTokenBytes+1024)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	token, err := ParseReceiptBody(r.Header.Get("Content-Type"), body)
	if err != nil {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, api.CodeMalformedReceipt, "%v", err))
		return
	}
	res, err := s.AcceptReceipt(r.Context(), token)
	if err != nil {
		s.log.Warn("receipt refused", "error", err.Error())
		httpx.WriteError(w, apiError(err))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, res)
}

// handleReceiptBatch accepts up to api.MaxReceiptBatch receipts in one request and answers each
// as POST /v1/receipts would have alone. They are decided by a few workers at once, so that the
// baselines they apply share the store's commits: an executor with several receipts queued makes
// one exchange and, on bbolt, about one commit per few receipts, instead of one of each per
// receipt. The work is bounded: at most receiptWorkers receipts of all requests are decided at
// once (single posts included), and a batch gets receiptBatchTimeout; what is not decided by
// then answers 503 receipt_timeout, which the executor retries.
func (s *Service) handleReceiptBatch(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		httpx.WriteError(w, httpx.Errorf(http.StatusUnsupportedMediaType, httpx.CodeUnsupportedType,
			"content type %q is not accepted: a batch is application/json", ct))
		return
	}
	body, err := httpx.ReadBody(w, r, maxReceiptBatchBytes)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	tokens, err := ParseReceiptBatch(body)
	if err != nil {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, api.CodeMalformedReceipt, "%v", err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), receiptBatchTimeout)
	defer cancel()
	out := api.ReceiptBatchResult{Results: make([]api.ReceiptItem, len(tokens))}
	if len(tokens) == 1 {
		// A batch of one (every batch when calls come one at a time) is decided on the
		// request's goroutine: a worker would only be a hand-off.
		out.Results[0] = s.receiptItem(ctx, tokens[0], 0)
	} else {
		next := make(chan int)
		var wg sync.WaitGroup
		for range min(len(tokens), receiptWorkers) {
			wg.Go(func() {
				for i := range next {
					out.Results[i] = s.receiptItem(ctx, tokens[i], i)
				}
			})
		}
		for i := range tokens {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	refused := map[string]int{}
	for _, it := range out.Results {
		if it.Error != nil {
			refused[it.Error.Code]++
		}
	}
	if len(refused) > 0 {
		s.log.Warn("receipts refused in a batch", "caller", callerOf(r.Context()), "receipts", len(tokens), "refused", refused)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// receiptItem decides one receipt of a batch. A panic is this item's 500, never the daemon's:
// net/http recovers a handler's own goroutine, not the workers it starts.
func (s *Service) receiptItem(ctx context.Context, token string, i int) (item api.ReceiptItem) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("receipt panicked", "batch_index", i, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			item = api.ReceiptItem{Status: http.StatusInternalServerError, Error: &api.ErrorDetail{Code: httpx.CodeInternal, Message: "internal error"}}
		}
	}()
	res, err := s.AcceptReceipt(ctx, token)
	if err == nil {
		return api.ReceiptItem{Status: http.StatusOK, Result: res}
	}
	s.log.Debug("receipt refused", "error", err.Error(), "batch_index", i)
	e := &httpx.Error{Status: http.StatusInternalServerError, Code: httpx.CodeInternal, Message: "internal error"}
	if ctx.Err() != nil && !errors.As(err, new(*httpx.Error)) {
		e = httpx.Errorf(http.StatusServiceUnavailable, api.CodeReceiptTimeout, "the batch was not decided within %s; post it again", receiptBatchTimeout)
	} else {
		errors.As(apiError(err), &e)
	}
	return api.ReceiptItem{Status: e.Status, Error: &api.ErrorDetail{Code: e.Code, Message: e.Message}}
}

const (
	// maxReceiptBatchBytes bounds a batch's body: an executor's receipts are well under 1 KiB
	// each, so a full batch is under a fifth of it.
	maxReceiptBatchBytes = 256 << 10
	// receiptWorkers is how many receipts verdictd decides at once, over every request.
	receiptWorkers = 16
	// receiptBatchTimeout bounds a batch's decisions, under the executor's 10-second client
	// timeout, so that what is decided is answered rather than posted again whole.
	receiptBatchTimeout = 5 * time.Second
)

// ParseReceiptBatch reads the body of POST /v1/receipts/batch: {"receipts": [JWS, ...]}, with 1
// to api.MaxReceiptBatch receipts, each a compact JWS; no other, repeated or case-varied member,
// nothing after it. It reads token by token and stops at the first fault, so a body of many
// tiny elements costs no more than the batch it may be. Any fault refuses the whole batch, and
// nothing of it is applied.
func ParseReceiptBatch(body []byte) ([]string, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(body)) // refuses repeated names and invalid UTF-8
	expect := func(k jsontext.Kind, what string) error {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		if tok.Kind() != k {
			return fmt.Errorf("want %s, found %s", what, tok.Kind())
		}
		return nil
	}
	if err := expect('{', "an object"); err != nil {
		return nil, err
	}
	var out []string
	seen := false
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		if name.String() != "receipts" {
			return nil, fmt.Errorf("unknown member %q", name.String())
		}
		seen = true
		if err := expect('[', `an array under "receipts"`); err != nil {
			return nil, err
		}
		for dec.PeekKind() != ']' {
			if len(out) == api.MaxReceiptBatch {
				return nil, fmt.Errorf("more than %d receipts in a batch", api.MaxReceiptBatch)
			}
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			if tok.Kind() != '"' {
				return nil, fmt.Errorf("receipts[%d]: want a string, found %s", len(out), tok.Kind())
			}
			if err := checkCompactJWS(tok.String()); err != nil {
				return nil, fmt.Errorf("receipts[%d]: %w", len(out), err)
			}
			out = append(out, tok.String())
		}
		if err := expect(']', "the end of the array"); err != nil {
			return nil, err
		}
	}
	if err := expect('}', "the end of the object"); err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("data after the batch")
	}
	if !seen || len(out) == 0 {
		return nil, errors.New("no receipts")
	}
	return out, nil
}

// ParseReceiptBody extracts the compact receipt JWS from a request body: the token itself
// (Content-Type application/jose, or anything that is not JSON), a JSON string, or
// {"receipt": "..."}.
func ParseReceiptBody(contentType string, body []byte) (string, error) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return "", errors.New("empty body")
	}
	var token string
	switch {
	case strings.HasPrefix(strings.ToLower(contentType), "application/jose"):
		token = string(b)
	case b[0] == '"':
		if err := httpx.DecodeStrict(b, &token); err != nil {
			return "", err
		}
	case b[0] == '{':
		var v struct {
			Receipt string `json:"receipt"`
		}
		if err := httpx.DecodeStrict(b, &v); err != nil {
			return "", err
		}
		token = v.Receipt
	default:
		token = string(b)
	}
	if err := checkCompactJWS(token); err != nil {
		return "", err
	}
	return token, nil
}

// checkCompactJWS refuses what cannot be a compact receipt JWS before anything parses it.
func checkCompactJWS(token string) error {
	if token == "" {
		return errors.New("no receipt")
	}
	if len(token) > verdict.MaxTokenBytes {
		return errors.New("receipt too large")
	}
	// A byte past ASCII reads as a rune past 'z', valid UTF-8 or not.
	if strings.ContainsFunc(token, func(c rune) bool {
		return !(c == '.' || c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z')
	}) {
		return errors.New("a receipt is a compact JWS: base64url parts separated by dots")
	}
	return nil
}

// AcceptReceipt verifies an executor receipt and, when it reports an executed call that
// matches its verdict's record, makes that call's arguments the prior_state of the action key.
// A refusal is an *httpx.Error whose code says why.
func (s *Service) AcceptReceipt(ctx context.Context, token string) (*api.ReceiptResult, error) {
	if s.receiptSlots != nil {
		select {
		case s.receiptSlots <- struct{}{}:
			defer func() { <-s.receiptSlots }()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	now := s.now()
	rc, err := verdict.VerifyReceiptContext(ctx, token, verdict.ReceiptExpectation{
		Issuers:    s.issuers,
		Algorithms: confx.SignatureAlgorithms(s.cfg.ReceiptAlgorithms),
		Now:        func() time.Time { return now },
		Skew:       s.cfg.ClockSkew.Or(DefaultClockSkew),
	})
	refuse := func(status int, code, format string, args ...any) error {
		s.metrics.receipts.WithLabelValues(code).Inc()
		return httpx.Errorf(status, code, format, args...)
	}
	if err != nil {
		reason := cmp.Or(string(verdict.ReasonOf(err)), string(verdict.Malformed))
		status := http.StatusForbidden
		if reason == string(verdict.Malformed) {
			status = http.StatusBadRequest
		}
		return nil, refuse(status, reason, "receipt refused: %s", reason)
	}
	// Its age is checked before anything is looked up: an old receipt is refused the same
	// whether or not its verdict is still known.
	if maxAge := s.cfg.receiptMaxAge(); now.Sub(time.Unix(rc.IssuedAt, 0)) > maxAge {
		return nil, refuse(http.StatusForbidden, api.CodeReceiptTooOld, "the receipt was signed more than receipt_max_age (%s) ago", maxAge)
	}
	rec, err := s.issuedVerdict(ctx, rc.ID)
	if err != nil {
		s.countStateError(err)
		return nil, err
	}
	if rec == nil {
		return nil, refuse(http.StatusNotFound, api.CodeUnknownVerdict, "no decision record issued that verdict")
	}
	switch {
	case rec.ArgumentsDigest == nil || *rec.ArgumentsDigest != rc.Arguments:
		return nil, refuse(http.StatusConflict, api.CodeArgumentsMismatch, "the receipt's arguments digest is not the verdict's")
	case rec.ActionKey == nil || *rec.ActionKey != rc.ActionKey:
		return nil, refuse(http.StatusConflict, api.CodeActionKeyMismatch, "the receipt's action key is not the verdict's")
	case !slices.Contains(rec.Audience, rc.Issuer):
		return nil, refuse(http.StatusForbidden, api.CodeNotInAudience, "the verdict did not name this executor")
	}
	out := &api.ReceiptResult{Accepted: true, VerdictID: rc.ID, RecordID: rec.RecordID, Decision: rc.Decision}
	if rc.Decision == string(api.ExecutionExecuted) {
		// Receipts can arrive out of order and be posted again: an older execution (by its
		// record id) never replaces a newer baseline, and the same one changes nothing.
		res, err := s.state.SetBaseline(ctx, rc.ActionKey, convstate.Baseline{IssuedAt: rc.IssuedAt,
			VerdictID: rc.ID, RecordID: rec.RecordID, Values: rec.CallArguments})
		if err != nil {
			s.countStateError(err)
			return nil, fmt.Errorf("receipt: store prior state: %w", err)
		}
		out.PriorState = res == convstate.BaselineApplied || res == convstate.BaselineCurrent
		out.Baseline = res.String()
	}
	label := "accepted"
	if out.Baseline == convstate.BaselineCurrent.String() || out.Baseline == convstate.BaselineSuperseded.String() {
		label = out.Baseline
	}
	s.metrics.receipts.WithLabelValues(label).Inc()
	s.log.Info("receipt accepted", "verdict_id", rc.ID, "record_id", rec.RecordID, "executor", rc.Issuer,
		"decision", rc.Decision, "prior_state", out.PriorState, "baseline", out.Baseline)
	return out, nil
}

// issuedVerdict returns what a receipt for verdict jti is checked against: the decision record
// that issued it, from this replica's file or, when another replica issued it, the summary in
// the shared store. nil means no known record issued jti.
func (s *Service) issuedVerdict(ctx context.Context, jti string) (*convstate.Verdict, error) {
	d, err := s.decisions.ByVerdict(ctx, jti)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return s.state.Verdict(ctx, jti)
	case err != nil:
		return nil, fmt.Errorf("receipt: %w", err)
	}
	v, err := convstate.VerdictOf(d.RecordID, d.Record)
	if err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	return v, nil
}
