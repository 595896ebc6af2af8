package verdictd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/convstate"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/verdict"
)

// Refusal codes of POST /v1/receipts beyond the verifier's reasons.
const (
	CodeMalformedReceipt  = "malformed_receipt"
	CodeUnknownVerdict    = "unknown_verdict"
	CodeArgumentsMismatch = "arguments_mismatch"
	CodeActionKeyMismatch = "action_key_mismatch"
	CodeNotInAudience     = "executor_not_in_audience"
	// CodeReceiptTooOld: the receipt was signed longer than receipt_max_age ago. A receipt
	// the executor posts arrives within a minute; an old one is a replay.
	CodeReceiptTooOld = "receipt_too_old"
)

func (s *Service) handleReceipt(w http.ResponseWriter, r *http.Request) {
	body, err := httpx.ReadBody(w, r, verdict.MaxTokenBytes+1024)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	token, err := ParseReceiptBody(r.Header.Get("Content-Type"), body)
	if err != nil {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, CodeMalformedReceipt, "%v", err))
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
// as POST /v1/receipts would have alone. They are decided concurrently, so that the baselines
// they apply share the store's commits: an executor with several receipts queued makes one
// exchange and, on bbolt, about one commit, instead of one of each per receipt.
func (s *Service) handleReceiptBatch(w http.ResponseWriter, r *http.Request) {
	body, err := httpx.ReadBody(w, r, maxReceiptBatchBytes)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	tokens, err := ParseReceiptBatch(body)
	if err != nil {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, CodeMalformedReceipt, "%v", err))
		return
	}
	out := api.ReceiptBatchResult{Results: make([]api.ReceiptItem, len(tokens))}
	var wg sync.WaitGroup
	for i, tok := range tokens {
		wg.Go(func() {
			res, err := s.AcceptReceipt(r.Context(), tok)
			if err != nil {
				s.log.Warn("receipt refused", "error", err.Error(), "batch_index", i)
				e := &httpx.Error{Status: http.StatusInternalServerError, Code: httpx.CodeInternal, Message: "internal error"}
				errors.As(apiError(err), &e)
				out.Results[i] = api.ReceiptItem{Status: e.Status, Error: &api.ErrorDetail{Code: e.Code, Message: e.Message}}
				return
			}
			out.Results[i] = api.ReceiptItem{Status: http.StatusOK, Result: res}
		})
	}
	wg.Wait()
	httpx.WriteJSON(w, http.StatusOK, out)
}

// maxReceiptBatchBytes bounds a batch's body: an executor's receipts are well under 1 KiB each.
const maxReceiptBatchBytes = 1 << 20

// ParseReceiptBatch reads the body of POST /v1/receipts/batch: {"receipts": [JWS, ...]}, with 1
// to api.MaxReceiptBatch receipts, each a compact JWS; no unknown, repeated or case-varied
// member. Any fault refuses the whole batch, and nothing of it is applied.
func ParseReceiptBatch(body []byte) ([]string, error) {
	var b api.ReceiptBatch
	if err := httpx.DecodeStrict(body, &b); err != nil {
		return nil, err
	}
	switch {
	case len(b.Receipts) == 0:
		return nil, errors.New("no receipts")
	case len(b.Receipts) > api.MaxReceiptBatch:
		return nil, fmt.Errorf("%d receipts: at most %d in a batch", len(b.Receipts), api.MaxReceiptBatch)
	}
	for i, tok := range b.Receipts {
		if err := checkCompactJWS(tok); err != nil {
			return nil, fmt.Errorf("receipts[%d]: %w", i, err)
		}
	}
	return b.Receipts, nil
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
	for i := 0; i < len(token); i++ {
		c := token[i]
		if !(c == '.' || c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return errors.New("a receipt is a compact JWS: base64url parts separated by dots")
		}
	}
	return nil
}

// AcceptReceipt verifies an executor receipt and, when it reports an executed call that
// matches its verdict's record, makes that call's arguments the prior_state of the action key.
// A refusal is an *httpx.Error whose code says why.
func (s *Service) AcceptReceipt(ctx context.Context, token string) (*api.ReceiptResult, error) {
	now := s.now()
	rc, err := verdict.VerifyReceiptContext(ctx, token, verdict.ReceiptExpectation{
		Issuers:    s.issuers,
		Algorithms: s.cfg.receiptAlgorithms(),
		Now:        func() time.Time { return now },
		Skew:       s.cfg.ClockSkew.Or(DefaultClockSkew),
	})
	if err != nil {
		reason := string(verdict.ReasonOf(err))
		if reason == "" {
			reason = string(verdict.Malformed)
		}
		s.metrics.receipts.WithLabelValues(reason).Inc()
		status := http.StatusForbidden
		if reason == string(verdict.Malformed) {
			status = http.StatusBadRequest
		}
		return nil, httpx.Errorf(status, reason, "receipt refused: %s", reason)
	}
	refuse := func(status int, code, format string, args ...any) error {
		s.metrics.receipts.WithLabelValues(code).Inc()
		return httpx.Errorf(status, code, format, args...)
	}
	// Its age is checked before anything is looked up: an old receipt is refused the same
	// whether or not its verdict is still known.
	if maxAge := s.cfg.receiptMaxAge(); now.Sub(time.Unix(rc.IssuedAt, 0)) > maxAge {
		return nil, refuse(http.StatusForbidden, CodeReceiptTooOld, "the receipt was signed more than receipt_max_age (%s) ago", maxAge)
	}
	rec, err := s.issuedVerdict(ctx, rc.ID)
	if err != nil {
		s.countStateError(err)
		return nil, err
	}
	if rec == nil {
		return nil, refuse(http.StatusNotFound, CodeUnknownVerdict, "no decision record issued that verdict")
	}
	switch {
	case rec.ArgumentsDigest == nil || *rec.ArgumentsDigest != rc.Arguments:
		return nil, refuse(http.StatusConflict, CodeArgumentsMismatch, "the receipt's arguments digest is not the verdict's")
	case rec.ActionKey == nil || *rec.ActionKey != rc.ActionKey:
		return nil, refuse(http.StatusConflict, CodeActionKeyMismatch, "the receipt's action key is not the verdict's")
	case !slices.Contains(rec.Audience, rc.Issuer):
		return nil, refuse(http.StatusForbidden, CodeNotInAudience, "the verdict did not name this executor")
	}
	out := &api.ReceiptResult{Accepted: true, VerdictID: rc.ID, RecordID: rec.RecordID, Decision: rc.Decision}
	if rc.Decision == string(store.Executed) {
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
