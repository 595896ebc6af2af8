package executor

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/tracing"
	"github.com/verdictgate/verdict/nonce"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/verdict"
)

// executeAnswer is api.ExecuteAnswer as the executor writes it: from parts already encoded, the
// record as stored and the result whose digest was recorded, each written as it is.
type executeAnswer struct {
	Execution jsontext.Value `json:"execution"`
	Result    jsontext.Value `json:"result,omitzero"`
	Receipt   string         `json:"receipt,omitempty"`
}

func (s *Service) handleExecute(w http.ResponseWriter, r *http.Request) {
	caller, ok := s.callers.RequireCaller(w, r, "executor", "a caller token is required", "the caller token is not accepted")
	if !ok {
		return
	}
	body, err := httpx.ReadBody(w, r, s.maxBody())
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	// The exactness check runs on the raw body: encoding/json would round a long number before
	// anything else could see it.
	if err := canonical.Validate(body); err != nil {
		httpx.WriteError(w, canonicalError(err))
		return
	}
	var req api.ExecuteRequest
	if err := httpx.DecodeStrict(body, &req); err != nil {
		httpx.WriteError(w, err)
		return
	}
	if req.Verdict == "" {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, api.CodeMissingVerdict, "verdict is required"))
		return
	}
	if a := bytes.TrimLeft(req.Arguments, " \t\r\n"); len(a) == 0 || a[0] != '{' {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, httpx.CodeWrongType, "arguments must be a JSON object"))
		return
	}
	// What the digest covers is exactly what is sent upstream.
	args, err := canonical.Transform(req.Arguments)
	if err != nil {
		httpx.WriteError(w, canonicalError(err))
		return
	}
	argsDigest := digestString(sha256.Sum256(args))

	// Begin comes after the body is read, so that shutdown does not wait on a slow upload.
	if !s.inflight.Begin() {
		s.refuseShuttingDown(w, r.Context(), req.Verdict, argsDigest)
		return
	}
	defer s.inflight.Done()
	ctx, span := s.tr.StartServer(r.Context(), r.Header, s.traced[caller], "execute")
	defer span.End()
	res := s.execute(ctx, req.Verdict, args, argsDigest, r.Header.Values(identity.SubjectTokenHeader))
	span.SetAttributes(attribute.Int("http.response.status_code", res.status))
	if res.rec != nil {
		span.SetAttributes(attribute.String("verdict.execution_record_id", res.rec.RecordID),
			attribute.String("verdict.verdict_id", res.rec.VerdictID), attribute.String("gen_ai.tool.name", res.rec.Tool),
			attribute.String("verdict.execution_decision", string(res.rec.Decision)))
	}
	if res.reason != "" {
		tracing.Fail(span, res.reason)
	}
	s.respond(w, res)
}

// refuseShuttingDown answers a request that arrived after shutdown began. It never reached
// verification, so nothing ran and its nonce is untouched. The refusal is recorded if the store
// still takes writes: an update the store accepts is committed before it closes, and one it
// no longer accepts fails with store.ErrClosed. Only a committed record goes into the answer;
// without one the answer carries no record, since a record that exists nowhere would be an
// invented one.
func (s *Service) refuseShuttingDown(w http.ResponseWriter, ctx context.Context, token, argsDigest string) {
	// No claims: the token was not verified, and unverified claims never enter a record.
	o, err := s.refusalAs(ctx, http.StatusServiceUnavailable, api.CodeShuttingDown, token, argsDigest, s.now(), nil, "")
	if err != nil {
		httpx.WriteError(w, httpx.Errorf(http.StatusServiceUnavailable, api.CodeShuttingDown, "the executor is shutting down"))
		return
	}
	s.respond(w, o)
}

// outcome is what one execute call came to.
type outcome struct {
	status int
	reason string // refusal or failure reason; "" when executed
	// message is the error message of a refusal when it says more than its reason: what to
	// do about it. "" means "verdict refused: <reason>".
	message string
	// connect is the page where the user connects an account at the server, for a refusal
	// that asks for one (credential_required at a user_grant server).
	connect string
	rec     *api.ExecutionRecord
	recJSON []byte // rec as stored, when the store handed back its bytes
	result  []byte // the MCP CallToolResult as encoding/json writes it; nil without one
	receipt string
}

// subjects are the request's subject token headers: the user's access token, which a
// token_exchange server's call needs (credential).
func (s *Service) execute(ctx context.Context, token string, args []byte, argsDigest string, subjects []string) outcome {
	now := s.now()
	// A verdict for a configured server whose tools are not listed right now (before the first
	// tools/list, or while the last listing is stale) cannot be checked against the tool: that is
	// "not now" (503, the nonce untouched), not a refusal of the verdict.
	var catalogDown bool
	toolDigest := func(server, tool string) (string, bool) {
		d, ok := s.currentDigest(server, tool)
		if !ok {
			if _, configured := s.cfg.Servers[server]; configured {
				_, listed := s.catalog.Tools(server)
				catalogDown = !listed
			}
		}
		return d, ok
	}
	_, vspan := s.tr.Start(ctx, "verify", trace.SpanKindInternal)
	claims, err := verdict.VerifyContext(ctx, token, verdict.Expectation{
		Issuers:    s.issuers,
		Algorithms: s.algs,
		Audience:   s.cfg.ExecutorID,
		// A store that does not guard single use across executors (the bbolt one) guards this
		// executor alone: a verdict that another executor may also run could run once on each.
		SoleAudience:    !nonce.Shared(s.nonces),
		Now:             func() time.Time { return now },
		Skew:            s.cfg.ClockSkew.Or(DefaultClockSkew),
		MaxTTL:          s.cfg.MaxTTL.Or(DefaultMaxTTL),
		ToolDigest:      toolDigest,
		ArgumentsDigest: argsDigest,
	})
	vspan.End()
	if err != nil {
		reason := cmp.Or(string(verdict.ReasonOf(err)), string(verdict.Malformed))
		// Only claims whose signature verified with a trusted key enter the refusal record:
		// unverified claims must never be recorded as if they were a verdict's.
		var signed *verdict.Claims
		if ve, ok := errors.AsType[*verdict.Error](err); ok {
			signed = ve.Claims
		}
		if reason == string(verdict.UnknownTool) && catalogDown {
			return s.refuse(ctx, http.StatusServiceUnavailable, api.ExecutionReasonCatalogUnavailable, token, argsDigest, now, signed)
		}
		o := s.refuse(ctx, http.StatusForbidden, reason, token, argsDigest, now, signed)
		if reason == string(verdict.Expired) && signed != nil {
			o.message = ExpiredMessage(time.Unix(signed.Expiry, 0), s.cfg.ClockSkew.Or(DefaultClockSkew))
		}
		return o
	}
	// The verdict binds the definition listed now (checked above); the pins say whether an
	// operator has reviewed it. Checked before the nonce is consumed: a held tool leaves the
	// verdict unused.
	if d, _ := s.currentDigest(claims.Server, claims.Tool); s.pinned().CheckPin(claims.Server, claims.Tool, d) != nil {
		return s.refuse(ctx, http.StatusForbidden, api.GateDefinitionUnpinned, token, argsDigest, now, claims)
	}
	// The user's own credential, for a server called with it, is made ready before the nonce
	// is consumed, its token at hand and its connection reserved: a refusal for it leaves the
	// verdict unused, and nothing of it can fail once the verdict is spent.
	cred, refused := s.credential(ctx, claims, subjects, token, argsDigest, now)
	if refused != nil {
		return *refused
	}
	defer cred.done()

	rec := &api.ExecutionRecord{
		ExecutorID:      s.cfg.ExecutorID,
		VerdictID:       claims.ID,
		ActionKey:       claims.ActionKey,
		RefPhase:        claims.Phase,
		RefRecord:       claims.Record,
		Principal:       claims.Subject,
		Server:          claims.Server,
		Tool:            claims.Tool,
		ArgumentsDigest: argsDigest,
		StartedAt:       now,
		Verdict:         token,
		TraceID:         tracing.TraceID(ctx),
	}
	recordCredential(rec, cred)
	sctx, sspan := s.tr.Start(ctx, "commit start", trace.SpanKindInternal)
	err = s.consumeAndStart(sctx, claims.ID, time.Unix(claims.Expiry, 0), rec)
	sspan.End()
	if err != nil {
		reason, status := nonce.Reason(err), http.StatusForbidden
		switch {
		case errors.Is(err, verdict.ErrReplayed) || reason == nonce.ReasonReplayed:
			reason, status = string(verdict.Replayed), http.StatusConflict
		case errors.Is(err, nonce.ErrConsumedNotStarted):
			reason, status = api.ExecutionReasonConsumedNotStarted, http.StatusConflict
		case reason == "" || reason == nonce.ReasonUnavailable:
			reason, status = nonce.ReasonUnavailable, http.StatusServiceUnavailable
		}
		out := s.refuse(ctx, status, reason, token, argsDigest, now, claims)
		if reason == nonce.ReasonUnavailable && s.recon != nil {
			// After the refusal is on record, so that the reconciler can copy its claims.
			s.wakeReconciler()
		}
		return out
	}
	s.metrics.verdict("accepted", "")
	// LogAttrs: typed attributes are not boxed into interface values, and the record keeps up
	// to five of them without allocating.
	s.log.LogAttrs(ctx, slog.LevelInfo, "executing", slog.String("record_id", rec.RecordID),
		slog.String("verdict_id", rec.VerdictID), slog.String("server", rec.Server), slog.String("tool", rec.Tool))

	// The call is not tied to the HTTP request: a caller that hangs up must not turn a call
	// already under way into an unrecorded one.
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CallTimeout.Or(DefaultCallTimeout))
	defer cancel()
	start := time.Now()
	callCtx, cspan := s.tr.Start(callCtx, "tools/call "+claims.Tool, trace.SpanKindClient,
		attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", claims.Tool),
		attribute.String("verdict.server", claims.Server))
	result, callErr := s.call(callCtx, claims.Server, claims.Tool, args, cred)
	cspan.End()
	decision, reason, status := classify(result, callErr, callCtx)
	s.metrics.call(rec.Server, rec.Tool, string(decision), time.Since(start).Seconds())

	// The result is encoded once: its digest is taken over these bytes and the response carries
	// them as they are.
	var resultJSON []byte
	var resultDigest string
	if result != nil {
		if raw, err := encodeResult(result); err == nil {
			resultJSON = raw
			resultDigest, _ = canonical.DigestJSON(raw)
		}
	}
	// The outcome is written whatever happened to the caller's request. rec is the record as
	// consumeAndStart stored it, so it is finished without being read back.
	out := outcome{status: status, reason: reason, rec: rec, result: resultJSON}
	fctx, fspan := s.tr.Start(context.WithoutCancel(ctx), "commit finish", trace.SpanKindInternal)
	recJSON, err := s.execs.FinishStarted(fctx, rec, decision, reason, resultDigest, s.now())
	fspan.End()
	if err != nil {
		s.log.Error("record execution outcome", "record_id", rec.RecordID, "error", err)
		rec.Decision, rec.Reason = decision, reason
	} else {
		out.recJSON = recJSON
	}
	s.metrics.execution(string(decision))
	s.log.LogAttrs(ctx, slog.LevelInfo, "execution finished", slog.String("record_id", rec.RecordID),
		slog.String("verdict_id", rec.VerdictID), slog.String("decision", string(decision)), slog.String("reason", reason))

	if decision == api.ExecutionExecuted || decision == api.ExecutionFailed {
		_, rspan := s.tr.Start(ctx, "receipt", trace.SpanKindInternal)
		out.receipt = s.signReceipt(rec)
		rspan.End()
	}
	return out
}

// encodeResult writes res as json.Marshal does, without json.Marshal's second pass: for a
// json.Marshaler, encoding/json checks the bytes MarshalJSON returns and compacts them, with
// HTML escaping, into a copy. CallToolResult.MarshalJSON returns what encoding/json itself
// wrote for the result, which is already compact and escaped, so that pass changes nothing.
// TestEncodeResultIsJSONMarshal holds the two to the same bytes.
func encodeResult(res *mcp.CallToolResult) ([]byte, error) {
	return res.MarshalJSON()
}

// currentDigest gives the verifier the tool definition digest as the upstream lists it now. A
// definition that cannot be digested yields a digest no verdict carries, so it is refused as
// schema_changed rather than run unchecked.
func (s *Service) currentDigest(server, tool string) (string, bool) {
	t, ok := s.catalog.Lookup(server, tool)
	if !ok {
		return "", false
	}
	if t.Err != nil || t.Digest == "" {
		return "unusable-definition", true
	}
	return t.Digest, true
}

// cred says whose connection the call takes: the shared one, or for a token_exchange server
// the account's own (upstreamFor), with the token the call was cleared with.
func (s *Service) call(ctx context.Context, server, tool string, args []byte, cred callCredential) (*mcp.CallToolResult, error) {
	c, err := s.upstreamFor(ctx, server, cred)
	if err != nil {
		return nil, &upstream.CallError{Server: server, Tool: tool, Kind: upstream.ErrUnavailable, Err: err}
	}
	if cred.held.token != "" {
		ctx = withHeldToken(ctx, cred.held)
	}
	// Made without the MCP library's client where the server's revision and the tool allow it,
	// with the definition the catalog holds now (the one the verdict's digest was checked
	// against); the result and the kind of failure are the same either way (upstream.Client.Call).
	// Not a pass-through call: it goes through net/http's Transport, never the gateway's own
	// connections.
	tc := upstream.ToolCall{Tool: tool, Args: json.RawMessage(args)}
	if t, ok := s.catalog.Lookup(server, tool); ok {
		tc.Definition = t.Raw
	}
	res, _, err := c.Call(ctx, tc)
	return res, err
}

// classify maps a call's result to the execution decision, its reason and the HTTP status. Only
// errors that guarantee nothing ran are "failed" (the server answered that it did not run the
// tool) or "not_executed" (the request never reached the server); everything else is
// outcome_unknown, which is never retried.
func classify(res *mcp.CallToolResult, err error, ctx context.Context) (api.ExecutionDecision, string, int) {
	switch {
	case err == nil && res != nil && !res.IsError:
		return api.ExecutionExecuted, "", http.StatusOK
	case err == nil && res != nil:
		return api.ExecutionFailed, api.ExecutionReasonToolError, http.StatusBadGateway
	case errors.Is(err, upstream.ErrInputRequired):
		return api.ExecutionFailed, api.ReasonUpstreamInputRequired, http.StatusBadGateway
	case errors.Is(err, upstream.ErrRejected):
		return api.ExecutionFailed, api.ExecutionReasonUpstreamRejected, http.StatusBadGateway
	case errors.Is(err, upstream.ErrUnavailable), errors.Is(err, upstream.ErrClosed):
		// Checked before the context: a call whose time ran out before any connection took
		// its request was not sent either.
		return api.ExecutionNotExecuted, api.ExecutionReasonUpstreamUnavailable, http.StatusBadGateway
	case ctx.Err() != nil:
		return api.ExecutionOutcomeUnknown, api.ExecutionReasonCallTimeout, http.StatusGatewayTimeout
	default:
		return api.ExecutionOutcomeUnknown, api.ExecutionReasonConnectionLost, http.StatusGatewayTimeout
	}
}

// refuse records a verdict the executor will not run, as not_executed with its reason.
func (s *Service) refuse(ctx context.Context, status int, reason, token, argsDigest string, now time.Time, c *verdict.Claims) outcome {
	o, _ := s.refusalAs(ctx, status, reason, token, argsDigest, now, c, "")
	return o
}

// refusalAs is refuse of a verdict whose call would have carried subject's own credential
// ("" when none), and also returns the error of the record's write: on error, the outcome's
// record was not stored.
func (s *Service) refusalAs(ctx context.Context, status int, reason, token, argsDigest string, now time.Time, c *verdict.Claims, subject string) (outcome, error) {
	s.metrics.verdict("rejected", reason)
	rec := &api.ExecutionRecord{
		ExecutorID:      s.cfg.ExecutorID,
		ArgumentsDigest: argsDigest,
		Decision:        api.ExecutionNotExecuted,
		Reason:          reason,
		StartedAt:       now,
		FinishedAt:      now,
		TraceID:         tracing.TraceID(ctx),
	}
	if len(token) <= verdict.MaxTokenBytes {
		rec.Verdict = token
	}
	if c != nil {
		rec.VerdictID, rec.ActionKey, rec.RefPhase, rec.RefRecord = c.ID, c.ActionKey, c.Phase, c.Record
		rec.Principal, rec.Server, rec.Tool = c.Subject, c.Server, c.Tool
		rec.Credential, rec.CredentialSubject = s.credentialOf(c.Server), subject
	}
	err := s.execs.RecordRefusal(context.WithoutCancel(ctx), rec)
	if err != nil {
		s.log.Error("record refusal", "reason", reason, "error", err)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "verdict refused", slog.String("record_id", rec.RecordID),
		slog.String("verdict_id", rec.VerdictID), slog.String("reason", reason))
	return outcome{status: status, reason: reason, rec: rec}, err
}

// ExpiredMessage is the message of an expired refusal: when the verdict expired (its exp, in
// RFC 3339 UTC), until when the clock skew let it be used, and that only a new preflight gives
// a verdict to run. The reason code stays expired; only the words for people say more.
func ExpiredMessage(exp time.Time, skew time.Duration) string {
	return fmt.Sprintf("verdict refused: expired: the verdict expired at %s (accepted until %s with clock_skew %s); "+
		"run the preflight again for a new verdict", exp.UTC().Format(time.RFC3339), exp.Add(skew).UTC().Format(time.RFC3339), skew)
}

func (s *Service) signReceipt(x *api.ExecutionRecord) string {
	tok, err := verdict.SignReceipt(s.receipt, verdict.Receipt{
		Issuer:    s.cfg.ExecutorID,
		ID:        x.VerdictID,
		ActionKey: x.ActionKey,
		Arguments: x.ArgumentsDigest,
		Decision:  string(x.Decision),
		IssuedAt:  s.now().Unix(),
	})
	if err != nil {
		s.log.Error("sign receipt", "record_id", x.RecordID, "error", err)
		return ""
	}
	if s.sink != nil {
		s.sink.enqueue(tok, x.VerdictID)
	}
	return tok
}

func (s *Service) respond(w http.ResponseWriter, o outcome) {
	if o.rec != nil && o.rec.Decision == api.ExecutionNotExecuted {
		msg := cmp.Or(o.message, "verdict refused: "+o.reason)
		if o.reason == api.ExecutionReasonUpstreamUnavailable {
			msg = "the tool's server could not be reached and nothing was sent to it; the verdict is used"
		}
		httpx.WriteJSON(w, o.status, map[string]any{
			"error":     api.ErrorDetail{Code: o.reason, Message: msg, ConnectURL: o.connect},
			"execution": o.rec,
		})
		return
	}
	rec := o.recJSON
	if rec == nil {
		var err error
		if rec, err = o.rec.MarshalJSON(); err != nil {
			httpx.WriteError(w, err)
			return
		}
	}
	b, err := jsonv2.Marshal(executeAnswer{Execution: rec, Result: o.result, Receipt: o.receipt})
	if err != nil {
		httpx.WriteError(w, fmt.Errorf("execute: encode answer: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(o.status)
	_, _ = w.Write(append(b, '\n'))
}

// digestString writes "sha256:" and the hex of sum in one allocation.
func digestString(sum [sha256.Size]byte) string {
	const prefix = "sha256:"
	var b [len(prefix) + 2*sha256.Size]byte
	copy(b[:], prefix)
	hex.Encode(b[len(prefix):], sum[:])
	return string(b[:])
}

func (s *Service) maxBody() int64 {
	if s.cfg.Limits.MaxBodyBytes > 0 {
		return s.cfg.Limits.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

func canonicalError(err error) *httpx.Error {
	if ce, ok := errors.AsType[*canonical.Error](err); ok {
		return httpx.Errorf(http.StatusBadRequest, ce.Code, "%s", ce.Error())
	}
	return httpx.Errorf(http.StatusBadRequest, httpx.CodeMalformedJSON, "%v", err)
}

func writeLine(w io.Writer, x *api.ExecutionRecord, mask store.Masker) error {
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	if mask != nil {
		if b, err = mask.Mask(b); err != nil {
			return err
		}
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
