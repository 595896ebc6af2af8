package mcpgate

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/loopback"
)

// connectKey is the id of the input request that asks a 2026-07-28 host to open the page
// where the user connects an account.
const connectKey = "connect"

// connectOpening starts every text that asks the user to connect an account: the gateway's own
// wording, which a relayed question may not use (see reservedWording).
const connectOpening = "Your account at the service must be connected"

// Texts of a call that waits for the user's account. The URL is never in a message of a URL
// elicitation (the host shows the url field itself, and the model sees neither); only a host
// that cannot be asked to open it is given it in the tool error's text.
const (
	connectAsk      = connectOpening + " before this request can run. Open the page to connect it there; the request goes on once you have."
	connectDeclined = "You did not connect your account at the service." + nothingDone
	connectStill    = connectOpening + " before this request can run, and it was not connected yet: connect it on the page you were shown, then make the request again." + nothingDone
	connectHidden   = connectOpening + " before this request can run, but the page to connect it cannot be shown here; ask your administrator." + nothingDone
)

// connectLink is the tool error of a host that cannot be asked to open page.
func connectLink(page string) string {
	return connectOpening + " before this request can run: connect it at " + page + ", then make the request again." + nothingDone
}

// maxConnectURL bounds the connect_url the gateway shows: the executor's pages are short.
const maxConnectURL = 2048

// errNotExecutorOrigin: a connect_url that is not on the origin of the gateway's executor.url
// or connect_pages.url.
var errNotExecutorOrigin = errors.New("not on the origin of executor.url or connect_pages.url")

// connectPage checks the executor's connect_url before a user is sent there: printable ASCII,
// bounded, https or http on a loopback host (loopback.SecureURL), and on the origin of the
// gateway's executor.url. The page is the executor's own: a refusal answered from somewhere
// else (a proxy, a tampered answer) does not get to send the user to a page of its choosing.
func (g *Gateway) connectPage(raw string) error {
	if len(raw) > maxConnectURL {
		return fmt.Errorf("%d bytes, more than %d", len(raw), maxConnectURL)
	}
	for i := range len(raw) {
		if c := raw[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%q holds a byte that is not printable ASCII (%#x)", raw, c)
		}
	}
	if err := loopback.SecureURL(raw); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	origins := []string{g.cfg.Executor.URL}
	if cp := g.cfg.ConnectPages; cp != nil && cp.URL != "" {
		origins = append(origins, cp.URL)
	}
	for _, o := range origins {
		if ou, err := url.Parse(o); err == nil && sameOrigin(u, ou) {
			return nil
		}
	}
	return fmt.Errorf("%q: %w", raw, errNotExecutorOrigin)
}

// sameOrigin reports whether a and b have one origin (RFC 6454): scheme, host and port, the
// scheme's default port when none is written.
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		return map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// connectRefusal is the executor's credential_required refusal x of vc, which names the page
// where the user connects the account: the tool error that gives the page, and the page, when
// it may be shown; otherwise a tool error without it, and no page.
func (g *Gateway) connectRefusal(vc verdictCall, x *execution) (*mcp.CallToolResult, string) {
	meta := []any{api.MetaRecordID, vc.RecordID, api.MetaExecutionRecord, x.Execution.RecordID}
	if err := g.connectPage(x.Error.ConnectURL); err != nil {
		g.log.Error("execute: the page to connect an account is not shown", "record_id", vc.RecordID, "execution_record", x.Execution.RecordID,
			"error", err.Error())
		return toolError(api.ExecutionReasonCredentialRequired, connectHidden, meta...), ""
	}
	return toolError(api.ExecutionReasonCredentialRequired, connectLink(x.Error.ConnectURL), meta...), x.Error.ConnectURL
}

// urlInputRequests reports whether a 2026-07-28 host declared URL-mode elicitation on req,
// the call it is asked within.
func urlInputRequests(req *mcp.CallToolRequest) bool {
	c := req.ClientCapabilities()
	return c != nil && c.Elicitation != nil && c.Elicitation.URL != nil
}

// run presents vc to the executor. When the executor refuses it for want of the user's
// account at the tool's server and names the page to connect it, a host that declared
// URL-mode elicitation is asked to open the page, and once the user accepted the same verdict
// is presented once more: its nonce was not spent, so the call runs without the model asking
// again. Any other host gets the tool error that gives the page.
func (g *Gateway) run(ctx context.Context, h host, st *callState, vc verdictCall) (*mcp.CallToolResult, error) {
	res, page := g.execute(ctx, vc)
	switch {
	case page == "":
		return res, nil
	case h.byResult && h.urlInput != nil && h.urlInput():
		return g.connectRequired(ctx, st, vc, page)
	case h.urlInPlace():
		return g.connectInPlace(ctx, h.ss, vc, page, res), nil
	}
	return res, nil
}

// connectInPlace asks an older host that declared URL elicitation to open page
// (elicitation/create, mode url), and presents vc again once the user accepted. refused is
// the call's answer when the host cannot be asked.
func (g *Gateway) connectInPlace(ctx context.Context, ss *mcp.ServerSession, vc verdictCall, page string, refused *mcp.CallToolResult) *mcp.CallToolResult {
	id, err := newNonce()
	if err != nil {
		return refused
	}
	ectx, espan := g.tr.Start(ctx, "elicitation", trace.SpanKindClient,
		attribute.String("mcp.method.name", "elicitation/create"), attribute.String("verdict.elicitation_mode", "url"))
	er, err := ss.Elicit(ectx, &mcp.ElicitParams{Mode: "url", ElicitationID: id, URL: page, Message: connectAsk})
	espan.End()
	if err != nil {
		g.log.Warn("url elicitation", "record_id", vc.RecordID, "error", err.Error())
		return refused
	}
	if er.Action != "accept" {
		return toolError(api.ReasonDeclined, connectDeclined, api.MetaRecordID, vc.RecordID)
	}
	res, still := g.connectedCall(ctx, vc)
	if !still {
		// The executor no longer asks for the account: the user's part is done.
		if err := ss.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: id}); err != nil {
			g.log.Warn("elicitation complete", "record_id", vc.RecordID, "error", err.Error())
		}
	}
	return res
}

// connectRequired parks the call of a 2026-07-28 host under a fresh requestState with vc,
// and asks the host to open page (an input_required result whose one input request is a
// URL-mode elicitation/create). The host's retry with the user's answer goes on in connected.
func (g *Gateway) connectRequired(ctx context.Context, st *callState, vc verdictCall, page string) (*mcp.CallToolResult, error) {
	st.Connect = &vc
	return g.park(ctx, st, nil, vc.RecordID, mcp.InputRequestMap{connectKey: &mcp.ElicitParams{Mode: "url", URL: page, Message: connectAsk}})
}

// connected continues a 2026-07-28 host's call parked by connectRequired with the user's
// answer: accepted, the same verdict is presented once more; anything else ends the call.
func (g *Gateway) connected(ctx context.Context, st *callState, answers mcp.InputResponseMap) *mcp.CallToolResult {
	vc := *st.Connect
	if resp, _ := answers[connectKey].(*mcp.ElicitResult); resp == nil || resp.Action != "accept" {
		return toolError(api.ReasonDeclined, connectDeclined, api.MetaRecordID, vc.RecordID)
	}
	res, _ := g.connectedCall(ctx, vc)
	return res
}

// connectedCall presents vc again after the user accepted to connect the account. still
// reports that the executor still refuses it for want of the account: the user was shown the
// page already, and is told to make the request again once the account is connected; the
// call is not asked again.
func (g *Gateway) connectedCall(ctx context.Context, vc verdictCall) (res *mcp.CallToolResult, still bool) {
	// An accept says the user opened the page, not that the account is connected: the
	// executor is asked to wait for it (until the verdict would be too close to its expiry to
	// be presented), and the verdict goes again once it is there, or once the wait is over.
	if vc.Server != "" {
		wait := MaxConnectWait
		if cp := g.cfg.ConnectPages; cp != nil && cp.Wait != 0 {
			wait = cp.Wait.D()
		}
		wctx, cancel := context.WithTimeout(ctx, min(wait, connectWait(vc.Verdict, time.Now())))
		ok, err := g.executor.connected(wctx, vc.Server)
		cancel()
		if err != nil {
			g.log.Warn("wait for the account", "record_id", vc.RecordID, "server", vc.Server, "error", err.Error())
		} else if !ok {
			g.log.Info("the account was not connected in time", "record_id", vc.RecordID, "server", vc.Server)
		}
	}
	res, page := g.execute(ctx, vc)
	if page != "" {
		res = toolError(api.ExecutionReasonCredentialRequired, connectStill, api.MetaRecordID, vc.RecordID, api.MetaExecutionRecord, res.Meta[api.MetaExecutionRecord])
	}
	return res, res.IsError && res.Meta[api.MetaReason] == api.ExecutionReasonCredentialRequired
}

// MaxConnectWait bounds how long a call waits for the user to connect an account, and is
// connect_pages.wait's default.
const MaxConnectWait = 2 * time.Minute

// connectWait is how long a call whose verdict is tok waits, at now, for the user to connect
// an account: until five seconds before the verdict expires, at most MaxConnectWait, none when
// the verdict's expiry does not read (the executor then decides, as it always does).
func connectWait(tok string, now time.Time) time.Duration {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return 0
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return 0
	}
	var c struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return 0
	}
	return max(0, min(time.Unix(c.Exp, 0).Add(-5*time.Second).Sub(now), MaxConnectWait))
}
