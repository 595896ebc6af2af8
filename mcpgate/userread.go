package mcpgate

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/client"
)

// userRead runs a pass-through call of a user server (user_servers) at the executor, which
// alone holds the users' credentials: with the user's token (the executor takes the call's
// principal from it), under the executor's own check that its policy passes the tool through.
// The server's questions, sampling requests and progress are not relayed on this path.
func (g *Gateway) userRead(ctx context.Context, x exposedTool, args json.RawMessage) *mcp.CallToolResult {
	if _, ok := subjectToken(ctx); !ok {
		return toolError(api.ExecutionReasonCredentialRequired, "This service acts with your own account, and this connection carries no sign-in of yours."+nothingDone)
	}
	ctx, cancel := g.forwarding(ctx, x.Server)
	defer cancel()
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	raw, err := g.executor.api.Read(ctx, x.Server, x.Tool, args)
	if err == nil {
		var res mcp.CallToolResult
		if err := json.Unmarshal(raw, &res); err != nil {
			g.log.Error("user read: undecodable result", "server", x.Server, "tool", x.Tool, "error", err.Error())
			return toolError(api.ReasonUpstreamFailed, "The service's answer could not be read.")
		}
		return hostResult(&res)
	}
	e, ok := errors.AsType[*client.Error](err)
	if !ok {
		g.log.Warn("user read", "server", x.Server, "tool", x.Tool, "error", err.Error())
		if timedOut(ctx) {
			return toolError(api.ReasonUpstreamTimeout, "The service did not answer in time.")
		}
		return toolError(api.ReasonUpstreamFailed, "The service could not be reached.")
	}
	g.log.Info("user read refused", "server", x.Server, "tool", x.Tool, "status", e.Status, "code", e.Code, "message", e.Message)
	if e.Code == api.ExecutionReasonCredentialRequired && e.ConnectURL != "" {
		if err := g.connectPage(e.ConnectURL); err != nil {
			g.log.Error("user read: the page to connect an account is not shown", "server", x.Server, "error", err.Error())
			return toolError(api.ExecutionReasonCredentialRequired, connectHidden)
		}
		return toolError(api.ExecutionReasonCredentialRequired, connectLink(e.ConnectURL))
	}
	switch e.Code {
	case api.ExecutionReasonCredentialRequired, api.ExecutionReasonCredentialInvalid, api.ExecutionReasonCredentialForeign,
		api.ExecutionReasonCredentialExchangeFailed, api.ExecutionReasonCredentialUnavailable:
		return toolError(e.Code, "Your own account at the service could not be used for this request now."+nothingDone)
	}
	return toolError(api.ReasonUpstreamFailed, "The service did not answer the request with a result.")
}
