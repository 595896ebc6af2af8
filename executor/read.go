package executor

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/policy"
)

// handleRead answers POST /v1/read: a pass-through call (a read or reversible tool, as the
// policy in force classes it) of a server called with each user's own authority, run with the
// credential of the user whose token comes with it. The gateway sends such calls here, since the
// users' credentials never leave the executor; a gated tool is refused whatever the request
// says, so that nothing but a verdict runs one. Reads are not execution records: they are
// logged and counted (executor_reads_total).
func (s *Service) handleRead(w http.ResponseWriter, r *http.Request) {
	caller, ok := s.callers.RequireCaller(w, r, "executor", "a caller token is required", "the caller token is not accepted")
	if !ok {
		return
	}
	body, err := httpx.ReadBody(w, r, s.maxBody())
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	var req api.ReadRequest
	if err := httpx.DecodeStrict(body, &req); err != nil {
		httpx.WriteError(w, err)
		return
	}
	if a := bytes.TrimLeft(req.Arguments, " \t\r\n"); len(a) == 0 || a[0] != '{' {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, httpx.CodeWrongType, "arguments must be a JSON object"))
		return
	}
	if !s.inflight.Begin() {
		httpx.WriteError(w, httpx.Errorf(http.StatusServiceUnavailable, api.CodeShuttingDown, "the executor is shutting down"))
		return
	}
	defer s.inflight.Done()
	ctx, span := s.tr.StartServer(r.Context(), r.Header, s.traced[caller], "read")
	defer span.End()
	refuse := func(status int, reason, message, connect string) {
		s.metrics.reads.WithLabelValues(req.Server, reason).Inc()
		s.log.LogAttrs(ctx, slog.LevelInfo, "read refused", slog.String("server", req.Server), slog.String("tool", req.Tool),
			slog.String("reason", reason))
		httpx.WriteJSON(w, status, api.ErrorBody{Error: api.ErrorDetail{Code: reason, Message: message, ConnectURL: connect}})
	}
	x := s.users[req.Server]
	switch {
	case x == nil && s.cfg.Servers[req.Server].URL == "" && len(s.cfg.Servers[req.Server].Command) == 0:
		refuse(http.StatusNotFound, api.CodeNotFound, "no such server", "")
		return
	case x == nil:
		refuse(http.StatusConflict, api.ReadReasonSharedServer, "the server is called with its shared credential: read it at the gateway", "")
		return
	}
	pol := s.pinned()
	if pol == nil {
		refuse(http.StatusForbidden, api.ReadReasonNoPolicy, "the executor has no policy (its policy key) to check the tool's class in; nothing was called", "")
		return
	}
	if t := pol.Tool(req.Server, req.Tool); t == nil || (t.EffectiveClass() != policy.Read && t.EffectiveClass() != policy.Reversible) {
		refuse(http.StatusForbidden, api.ReadReasonNotPassThrough, "the policy gates the tool: only a verdict runs it; nothing was called", "")
		return
	}
	d, listed := s.currentDigest(req.Server, req.Tool)
	if !listed {
		refuse(http.StatusNotFound, "unknown_tool", "the server does not list the tool now", "")
		return
	}
	if pol.CheckPin(req.Server, req.Tool, d) != nil {
		refuse(http.StatusForbidden, api.GateDefinitionUnpinned, "the policy's pins hold the tool back; nothing was called", "")
		return
	}
	cc, cr := s.userCredential(ctx, x, "", "", r.Header.Values(identity.SubjectTokenHeader), true)
	if cr != nil {
		refuse(cr.status, cr.reason, cr.message, cr.connect)
		return
	}
	defer cc.done()
	res, err := s.call(ctx, req.Server, req.Tool, req.Arguments, cc)
	if err == nil && res != nil {
		b, err := json.Marshal(res)
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
		s.metrics.reads.WithLabelValues(req.Server, "ok").Inc()
		httpx.WriteJSON(w, http.StatusOK, api.ReadAnswer{Result: b})
		return
	}
	_, reason, status := classify(res, err, ctx)
	refuse(status, reason, "the tool's server did not answer the call with a result", "")
}
