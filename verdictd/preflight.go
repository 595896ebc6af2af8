package verdictd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/approvals"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/convstate"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/tracing"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/verdict"
)

// ErrPreflightTimeout is the cause of a preflight's context when preflight_timeout passed, and
// is wrapped by the error of a preflight refused for it: nothing of it was recorded.
var ErrPreflightTimeout = errors.New("preflight not decided within preflight_timeout")

// answerWindow is how long writing a committed record may take, from the end of its commit.
// The server's write timeout counts from the request's headers; a commit that ends close to it
// must not lose the answer of a record it wrote.
const answerWindow = 10 * time.Second

// Result is one decided preflight: the record as stored (its JSON is the response body) and
// the record itself.
type Result struct {
	Record *api.Record
	JSON   []byte
}

func (s *Service) handlePreflight(w http.ResponseWriter, r *http.Request) {
	// The deadline counts from the handler's start, before the body is read, as the server's
	// write timeout counts from the headers: a slow body leaves less time to decide, never
	// less time to answer.
	ctx, cancel := context.WithTimeoutCause(r.Context(), s.cfg.preflightTimeout(), ErrPreflightTimeout)
	defer cancel()
	// The record takes its trace id from this span: only a caller trusted for tracing chooses it.
	ctx, span := s.tr.StartServer(ctx, r.Header, s.traced[callerOf(r.Context())], "preflight")
	defer span.End()
	lim := s.cfg.limits()
	act, err := s.authority(ctx, r)
	if err != nil {
		s.countRefusal(err)
		httpx.WriteError(w, err)
		return
	}
	body, err := httpx.ReadBody(w, r, int64(lim.MaxBytes))
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	res, err := s.preflight(ctx, body, act)
	if err != nil {
		code := "internal"
		if he, ok := errors.AsType[*httpx.Error](apiError(err)); ok {
			code = he.Code
		}
		tracing.Fail(span, code)
		switch {
		case errors.Is(err, ErrPreflightTimeout):
			s.log.Warn("preflight refused: not decided within preflight_timeout", "timeout", s.cfg.preflightTimeout().String())
		case errors.Is(err, ErrStateUnavailable):
			s.log.Error("preflight refused: state store unavailable", "error", err.Error())
		}
		httpx.WriteError(w, apiError(err))
		return
	}
	span.SetAttributes(recordAttrs(res.Record)...)
	// The record is committed: its caller gets it. Servers that cannot move the deadline
	// (HTTP/2 once its write timeout fired, a test recorder) answer within the one they have,
	// which preflight_timeout leaves room for.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(answerWindow))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(res.JSON)
}

// apiError maps a Preflight error to the contract's envelope.
func apiError(err error) error {
	var re *gates.RequestError
	var he *httpx.Error
	switch {
	case errors.As(err, &he):
		return he
	case errors.Is(err, ErrPreflightTimeout):
		return httpx.Errorf(http.StatusServiceUnavailable, api.CodePreflightTimeout,
			"the preflight was not decided within its time; nothing was recorded, try again")
	case errors.Is(err, ErrStateUnavailable):
		return httpx.Errorf(http.StatusServiceUnavailable, api.CodeStateStoreUnavailable,
			"the shared state store did not answer; nothing was decided, try again")
	case errors.As(err, &re):
		status := http.StatusBadRequest
		if re.Code == api.CodeTooLarge {
			status = http.StatusRequestEntityTooLarge
		}
		return httpx.Errorf(status, re.Code, "%s", re.Msg)
	case errors.Is(err, store.ErrClosed), errors.Is(err, context.Canceled):
		return httpx.Errorf(http.StatusServiceUnavailable, api.CodeStoreUnavailable, "the decision could not be recorded")
	}
	return err
}

// Preflight decides one request body (docs/preflight.md) and stores its decision record, with the
// verdict when the outcome is verdict_issued. An error means nothing was stored: a bad request
// (*gates.RequestError, or an *httpx.Error for an unknown action key), a preflight not decided
// within preflight_timeout (ErrPreflightTimeout), or a failure to decide, sign or store.
// Its Go caller is its own authority: any principal may be named, as callers entries bound only
// the HTTP API's callers.
func (s *Service) Preflight(ctx context.Context, body []byte) (*Result, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.preflightTimeout(), ErrPreflightTimeout)
	defer cancel()
	return s.preflight(ctx, body, &authority{any: true})
}

// preflight is Preflight under the caller's deadline, for a principal act vouches for. Nothing
// is committed once ctx has ended: a record is written only while its caller still waits for it.
func (s *Service) preflight(ctx context.Context, body []byte, act *authority) (*Result, error) {
	res, err := s.decideAndCommit(ctx, body, act)
	if err == nil {
		return res, nil
	}
	// Counted here, once, whichever step's read or write of the shared state store failed
	// (the request's decoding, the conversation's bound, the call's approvals, the run, the
	// commit): a step added later is counted without a call of its own.
	s.countStateError(err)
	if errors.Is(context.Cause(ctx), ErrPreflightTimeout) && !errors.As(err, new(*gates.RequestError)) && !errors.As(err, new(*httpx.Error)) {
		// Whatever failed on the way (a measurement, the state store, the commit that was not
		// started), it failed because the time was up.
		return nil, fmt.Errorf("preflight: %w: %w", ErrPreflightTimeout, err)
	}
	return nil, err
}

func (s *Service) decideAndCommit(ctx context.Context, body []byte, act *authority) (*Result, error) {
	start := time.Now()
	lim := s.cfg.limits()
	req, tr, err := s.decode(ctx, body, lim, act)
	if err != nil {
		s.countRefusal(err) // a trigger's principal is checked before its key is looked up
		return nil, err
	}
	// Before anything is decided or recorded: a principal its caller may not act for leaves
	// no trace in the records, and spends none of the principal's asks.
	if err := act.allows(req.Principal); err != nil {
		s.countRefusal(err)
		return nil, err
	}
	snap := s.snap.Load()
	tool, toolErr := snap.lookup(req.Server, req.Tool)
	if errors.Is(toolErr, errUnknownTool) {
		// Nothing can settle a call to a tool that does not exist: no record, no ask spent.
		return nil, httpx.Errorf(http.StatusNotFound, api.CodeUnknownTool, "%s", toolErr.Error())
	}
	gt, toolDigest := gateTool(tool), tool.Digest
	if toolErr != nil {
		// The engine still decides what it can (not gated, Gate 1); a tool without a usable
		// definition then ends in definition repair, never in a pass, and its approvals
		// approve nothing (no digest binds them).
		gt, toolDigest = gates.Tool{Name: req.Tool}, ""
	}

	conv := gates.Conversation{Principal: req.Principal, ID: req.ConversationID}
	unlock, err := s.locks.lock(ctx, conv)
	if err != nil {
		return nil, fmt.Errorf("preflight: wait for the conversation: %w", err)
	}
	defer unlock()
	// Before anything is decided: a conversation beyond the principal's bound spends no ask
	// and leaves no record. On bbolt the commit that starts a conversation checks again.
	if err := s.state.Admit(ctx, conv); err != nil {
		return nil, s.conversationRefused(ctx, act, err)
	}
	// The console approvals of this call, under the conversation's lock: no other preflight
	// of the call creates or uses one meanwhile.
	call, err := s.approvals.OfCall(ctx, req, snap.policy, toolDigest)
	if err != nil {
		return nil, err
	}
	// With a shared store, another replica may change this conversation between the run's
	// reads and its commit; the commit then fails its compare and the run is decided again on
	// the new counts, so that no two replicas count from the same value.
	var d decision
	for attempt := 1; ; attempt++ {
		rs := s.state.Begin()
		d, err = s.decide(ctx, rs, snap, req, tr, tool, gt, toolErr, act.record(), call)
		if err == nil {
			err = decidedInTime(ctx)
		}
		if err != nil {
			return nil, err
		}
		// The record, the verdict it carries, its approval and every counter or question id
		// the run changed are one commit, in the order the state store keeps: nothing is
		// asked or issued that is not on record.
		d.Attempt = attempt
		if err = rs.Commit(ctx, &d.Write); !errors.Is(err, convstate.ErrConflict) {
			break
		}
		s.metrics.stateConflicts.Inc()
		if attempt == maxStateAttempts {
			err = &StateUnavailableError{Op: "commit", Err: fmt.Errorf("%w %d times in a row", convstate.ErrConflict, attempt)}
			break
		}
		// A short random pause, so that two replicas retrying the same conversation do not
		// collide again in step.
		select {
		case <-time.After(rand.N(time.Duration(attempt) * 2 * time.Millisecond)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	rec := d.Record
	switch {
	case err == nil:
	case errors.Is(err, ErrStateUnavailable):
		return nil, err
	case errors.Is(err, convstate.ErrConversationLimit):
		return nil, s.conversationRefused(ctx, act, err)
	case errors.Is(err, store.ErrApprovalChanged):
		s.log.Info("preflight: the call's approval changed before the commit", "record_id", rec.RecordID)
		return nil, approvals.ErrChanged
	case errors.Is(err, convstate.ErrApprovalTooLarge):
		// Its arguments and drafts, in full, exceed what the shared store keeps of one.
		s.log.Warn("preflight: the call's approval is too large for the etcd state store", "record_id", rec.RecordID)
		return nil, httpx.Errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge,
			"the call's approval exceeds %d bytes, the most the shared state store keeps; nothing was recorded", convstate.MaxApprovalBytes)
	case errors.Is(err, approvals.ErrLimit):
		s.log.Warn("preflight: the principal has too many pending approvals", "principal", rec.Principal, "record_id", rec.RecordID)
		return nil, approvals.ErrLimit
	default:
		s.log.Error("store decision record", "record_id", rec.RecordID, "error", err.Error())
		return nil, fmt.Errorf("preflight: store record: %w", err)
	}
	s.approvals.Committed(d.approval)
	s.metrics.observe(rec)
	s.metrics.duration.Observe(time.Since(start).Seconds())
	if rec.VerdictID != nil {
		s.metrics.verdicts.Inc()
	}
	s.logPreflight(ctx, rec)
	return &Result{Record: rec, JSON: d.Stored}, nil
}

// decidedInTime refuses a run decided after its deadline, or after its caller left: one whose
// evaluations or measurements the deadline cut short, or that waited too long for its
// conversation. Nothing of it may be committed, since its answer might not be written.
func decidedInTime(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("preflight: decided too late: %w", err)
	}
	return nil
}

// logPreflight writes the one log line of a stored preflight.
func (s *Service) logPreflight(ctx context.Context, rec *api.Record) {
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := [...]slog.Attr{
		slog.String("record_id", rec.RecordID), slog.String("outcome", rec.Outcome), slog.String("gate", rec.Gate.Kind),
		slog.String("server", rec.Server), slog.String("tool", rec.Tool), slog.String("policy_version", rec.PolicyVersion),
		{},
	}
	n := len(attrs) - 1
	if rec.VerdictID != nil {
		attrs[n] = slog.String("verdict_id", *rec.VerdictID)
		n++
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "preflight", attrs[:n]...)
}

// maxStateAttempts bounds how often one preflight is decided again because another replica
// changed its conversation meanwhile.
const maxStateAttempts = 8

// recordSizeHint sizes the buffer a record is encoded into from the previous record: a
// little more than it, so that a record of the same shape is encoded without growing the
// buffer and without the rest of a fixed worst case.
func (s *Service) recordSizeHint() int {
	return min(int(s.lastRecordSize.Load())*9/8+64, 64<<10)
}

// decision is a decided preflight, ready to commit.
type decision struct {
	convstate.Write
	// approval is the console approval written with the record: new, or used by it.
	approval *approvals.Write
}

// decide runs the engine on rs and, for a verdict_issued record, signs the verdict. A trigger
// run (tr set) is first checked against the occurrences its deferred record has left, and
// one that ends in a verdict uses one up in rs.
func (s *Service) decide(ctx context.Context, rs convstate.Run, snap *snapshot, req *api.Request, tr *trigger,
	tool upstream.Tool, gt gates.Tool, toolErr error, auth *api.PrincipalAuth, call *approvals.Call) (decision, error) {
	fail := func(err error) (decision, error) { return decision{}, err }
	var d decision
	var (
		uses    convstate.Uses
		allowed int
	)
	if tr != nil {
		var err error
		if uses, allowed, err = s.checkOccurrence(ctx, rs, snap.policy, req, tr); err != nil {
			return fail(err)
		}
	}
	if err := rs.Prefetch(ctx, req); err != nil {
		return fail(fmt.Errorf("preflight: %w", err))
	}
	in := gates.Input{Tool: gt, Policy: snap.policy, Request: req, State: rs, Console: call.Decisions(s.now())}
	var capture *gates.Capture
	if s.cfg.Records.CaptureRequests {
		in, capture = s.engine.Capture(in)
	}
	rec, err := s.engine.Run(ctx, in)
	if err != nil {
		return fail(fmt.Errorf("preflight: %w", err))
	}
	rec.PrincipalAuth = auth
	if tr != nil {
		rec.Occurrence = &api.Occurrence{RecordID: tr.recordID, Occurrence: uses.Count + 1, Allowed: allowed}
		if rec.Outcome == api.OutcomeVerdictIssued {
			// Only a verdict uses the occurrence up, in the commit that stores it.
			rs.Consume(tr.recordID, convstate.Uses{Count: uses.Count + 1, LastMillis: s.now().UnixMilli(), LastRecordID: rec.RecordID})
		}
	}
	rec.TraceID = tracing.TraceID(ctx)
	if toolErr != nil {
		rec.ToolSchemaDigest = nil
		if rec.Gate.Kind == api.GateSchemaUnsupported {
			rec.Gate.Detail = toolErr.Error()
			// A changed tool is held by its pin: the operator's review, not the definition,
			// is what it waits for.
			if pe, ok := errors.AsType[*policy.PinError](toolErr); ok {
				rec.Gate.Kind, rec.Gate.Detail = api.GateDefinitionUnpinned, pe.Error()
				s.metrics.pinRefusals.WithLabelValues(req.Server).Inc()
			}
		}
		if rec.Outcome == api.OutcomeVerdictIssued {
			return fail(errors.New("preflight: engine passed a tool without a definition"))
		}
	} else if rec.ToolSchemaDigest != nil {
		// The digest the executor compares is the catalog's: record and verdict carry that one.
		rec.ToolSchemaDigest = &tool.Digest
	}
	if rec.Outcome == api.OutcomeVerdictIssued {
		_, span := s.tr.Start(ctx, "sign", trace.SpanKindInternal)
		claims, err := s.sign(snap.policy, rec, tool.Digest)
		span.End()
		if err != nil {
			return fail(err)
		}
		d.Audience = claims.Audience
	}
	if d.approval, err = call.Bind(rec, s.now()); err != nil {
		return fail(err)
	}
	if d.approval != nil {
		d.Approval = &d.approval.ApprovalWrite
	}
	meta := store.DecisionMeta{RecordID: rec.RecordID, Outcome: rec.Outcome, Time: s.now()}
	if t, err := time.Parse(time.RFC3339Nano, rec.Timestamp); err == nil {
		meta.Time = t
	}
	if rec.ActionKey != nil {
		meta.ActionKey = *rec.ActionKey
	}
	if rec.VerdictID != nil {
		meta.VerdictID = *rec.VerdictID
	}
	// The record is encoded once, into the value the store keeps: those bytes are also the
	// response and what a shared state store reads the verdict's summary from.
	appendRecord := func(b []byte) ([]byte, error) { return apijson.AppendRecord(b, rec) }
	recordLen := -1 // with a capture: the length of the record before it
	if capture != nil {
		c, err := capture.Result(req, gt, meta.Time)
		if err != nil {
			return fail(fmt.Errorf("preflight: %w", err))
		}
		appendRecord = func(b []byte) ([]byte, error) {
			n := len(b)
			b, err := apijson.AppendRecord(b, rec)
			if err != nil {
				return b, err
			}
			recordLen = len(b) - n
			return apijson.AppendCapture(b, c)
		}
	}
	enc, out, err := store.EncodeDecisionWith(meta, s.recordSizeHint(), appendRecord)
	if err != nil {
		return fail(fmt.Errorf("preflight: encode record: %w", err))
	}
	s.lastRecordSize.Store(int64(len(out)))
	if recordLen > 0 {
		// The capture is kept, never answered: it holds what the caller was not shown (the
		// measured values). The response is the record alone, a copy of its bytes closed
		// where the capture begins.
		out = append(out[:recordLen-1:recordLen-1], '}')
	}
	d.Record, d.Encoded, d.Stored = rec, enc, out
	return d, nil
}

// countStateError counts a failure of the shared state store.
func (s *Service) countStateError(err error) {
	if su, ok := errors.AsType[*StateUnavailableError](err); ok {
		s.metrics.stateErrors.WithLabelValues(su.Op).Inc()
	}
}

// sign issues the verdict of a verdict_issued record, puts it and its id in the record, and
// returns the claims it signed. Every precondition is checked again here: a verdict is the one
// output that authorizes a call.
func (s *Service) sign(p *policy.Policy, rec *api.Record, tsd string) (*verdict.Claims, error) {
	fail := func(msg string) (*verdict.Claims, error) {
		return nil, httpx.Errorf(http.StatusInternalServerError, api.CodeSigningFailed, "no verdict issued: %s", msg)
	}
	switch {
	case rec.UnknownCount == nil || *rec.UnknownCount != 0:
		return fail("unknown items remain")
	case len(rec.Unmet) != 0:
		return fail("unmet items remain")
	case rec.ArgumentsDigest == nil || rec.ActionKey == nil || rec.Phase == nil:
		return fail("record lacks arguments digest, action key or phase")
	case p.Tool(rec.Server, rec.Tool).EffectiveClass() != policy.Irreversible:
		return fail("tool is not gated")
	case tsd == "":
		return fail("no tool definition digest")
	}
	// The verdict's args must cover exactly the call the record carries: derive it again rather
	// than trust the engine's field.
	if d, err := canonical.Digest(rec.CallArguments); err != nil || d != *rec.ArgumentsDigest {
		return fail("arguments digest does not match call_arguments")
	}
	sv := p.Servers[rec.Server]
	if sv == nil || len(sv.Audience) == 0 {
		return fail("the policy names no audience for server " + rec.Server)
	}
	jti, err := verdict.NewID()
	if err != nil {
		return nil, fmt.Errorf("verdict id: %w", err)
	}
	iat := s.now().Unix()
	slots := gates.VerdictSlots(rec)
	vs := make([]verdict.Slot, len(slots))
	for i, sl := range slots {
		// The claim points at the record's own source (the same string type underneath):
		// signing only reads it.
		vs[i] = verdict.Slot{ID: sl.ID, Status: sl.Status, Source: (*string)(sl.Source)}
	}
	claims := &verdict.Claims{
		Issuer:     s.cfg.Issuer,
		Subject:    rec.Principal,
		Audience:   append([]string(nil), sv.Audience...),
		IssuedAt:   iat,
		NotBefore:  iat,
		Expiry:     iat + int64(s.cfg.TTL()/time.Second),
		ID:         jti,
		Server:     rec.Server,
		Tool:       rec.Tool,
		ToolDigest: tsd,
		Policy:     rec.PolicyVersion,
		Arguments:  *rec.ArgumentsDigest,
		Slots:      vs,
		ActionKey:  *rec.ActionKey,
		Phase:      *rec.Phase,
		Record:     rec.RecordID,
	}
	token, err := verdict.Sign(s.ring.Current(), *claims)
	if err != nil {
		return fail(err.Error())
	}
	rec.Verdict, rec.VerdictID = &token, &jti
	return claims, nil
}

// triggerRequest is the body of an at_trigger preflight: the deferred action's key, the
// principal, and what is fresh at trigger time — answers, and the pre-set data as it is now
// (a deferred record never stores pre-set values: they are re-fetched like every other source).
type triggerRequest struct {
	Principal      string                `json:"principal"`
	Phase          string                `json:"phase"`
	ActionKey      string                `json:"action_key"`
	ConversationID *string               `json:"conversation_id,omitempty"`
	Server         *string               `json:"server,omitempty"`
	Tool           *string               `json:"tool,omitempty"`
	UserAnswers    []api.Answer          `json:"user_answers,omitempty"`
	PreSetData     map[string]api.PreSet `json:"pre_set_data,omitempty"`
}

// decode turns a request body into the engine's request. An at_trigger body is expanded into
// the stored intent of its deferred record, and the result is checked like any other request.
func (s *Service) decode(ctx context.Context, body []byte, lim gates.Limits, act *authority) (*api.Request, *trigger, error) {
	if bytes.Contains(body, []byte(api.PhaseAtTrigger)) {
		var probe struct {
			Phase *string `json:"phase"`
		}
		if json.Unmarshal(body, &probe) == nil && probe.Phase != nil && *probe.Phase == api.PhaseAtTrigger {
			return s.decodeTrigger(ctx, body, lim, act)
		}
	}
	req, err := gates.DecodeRequest(body, lim)
	if err != nil {
		return nil, nil, err
	}
	if req.Phase != nil && *req.Phase == api.PhaseAtTrigger {
		// The phase was spelt with escapes, so the cheap test above missed it. It is a trigger
		// all the same, and a trigger carries nothing but the deferred action's key: a whole
		// request must never run as the trigger of an intent that was never deferred.
		return s.decodeTrigger(ctx, body, lim, act)
	}
	return req, nil, nil
}

// decodeTrigger expands an at_trigger body into the stored intent of its deferred record.
func (s *Service) decodeTrigger(ctx context.Context, body []byte, lim gates.Limits, act *authority) (*api.Request, *trigger, error) {
	var tr triggerRequest
	if err := gates.DecodeStrict(body, lim, &tr); err != nil {
		return nil, nil, err
	}
	if tr.ActionKey == "" || tr.Principal == "" {
		return nil, nil, &gates.RequestError{Code: api.CodeInvalidRequest, Msg: "an at_trigger request names its principal and action_key"}
	}
	// Before the key is looked up: a caller that may not act for the principal learns nothing,
	// not even whether the key exists.
	if err := act.allows(tr.Principal); err != nil {
		return nil, nil, err
	}
	// The latest deferred run of the key: its intent in a shared store, which every replica
	// can trigger, or else in the replica's own records.
	rec, err := s.state.Deferred(ctx, tr.ActionKey)
	if err != nil {
		return nil, nil, fmt.Errorf("preflight: %w", err)
	}
	// A key of another principal is answered like an unknown one.
	if rec == nil || rec.Principal != tr.Principal {
		return nil, nil, httpx.Errorf(http.StatusNotFound, api.CodeUnknownActionKey, "no deferred request of this principal has that action key")
	}
	// In a fixed order, so that a trigger differing in several is refused with one message.
	for _, m := range []struct {
		name      string
		got, want *string
	}{{"server", tr.Server, &rec.Server}, {"tool", tr.Tool, &rec.Tool}, {"conversation_id", tr.ConversationID, &rec.ConversationID}} {
		if m.got != nil && *m.got != *m.want {
			return nil, nil, &gates.RequestError{Code: api.CodeInvalidRequest, Msg: m.name + " differs from the deferred request's"}
		}
	}
	req, err := gates.TriggerRequest(rec, tr.UserAnswers, tr.PreSetData)
	if err != nil {
		return nil, nil, fmt.Errorf("preflight: %w", err)
	}
	// The expanded request is checked exactly as if the caller had sent it whole.
	if err := gates.CheckRequest(req, lim); err != nil {
		return nil, nil, err
	}
	return req, &trigger{recordID: rec.RecordID}, nil
}

// recordAttrs are the span attributes of a decided preflight: what the OpenTelemetry MCP
// conventions name (the tool), the record and verdict ids and the outcome; never a value.
func recordAttrs(rec *api.Record) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.tool.name", rec.Tool),
		attribute.String("verdict.server", rec.Server),
		attribute.String("verdict.record_id", rec.RecordID),
		attribute.String("verdict.outcome", rec.Outcome),
	}
	if rec.VerdictID != nil {
		attrs = append(attrs, attribute.String("verdict.verdict_id", *rec.VerdictID))
	}
	return attrs
}
