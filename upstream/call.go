package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/tracing"
)

// Tool calls.
//
// Every tools/call the client makes is a [Client.Call] of a ToolCall,
// which says what is sent (the tool, the argument bytes, and for a retry
// the answers and the server's state) and what the caller asks of the call
// (its result bytes, what it relays, whether the result only goes on to a
// host). A call goes one of two ways, chosen by plainCall alone:
//
//   - through the SDK's client, by request (request.go), as every other
//     request on the connection goes; or
//   - without it (passcall.go), sent and read by the client itself, where
//     what the SDK would send and do is known exactly.
//
// Both give the same result and fail with the same kinds, so the choice
// changes what the call costs, never what it returns. Each path honours
// what it can: only the SDK's captures the result's bytes (rawcall.go) and
// sends a retry's answers; only the plain one decodes a pass-through
// result in one pass. A call asking for what its path cannot give goes
// the other way, or, when no path can give all of it, is refused with
// ErrRejected before anything is sent.

// A ToolCall is one tools/call and what its caller asks of it.
type ToolCall struct {
	// Tool is the name of the tool called.
	Tool string
	// Args are the argument bytes, sent as given (whitespace compacted);
	// a caller passes the canonical bytes it digested. They must be a
	// JSON object, or empty to send no arguments.
	Args json.RawMessage
	// Definition is the tool's definition as the server listed it
	// (Tool.Raw). With it the call may be made without the SDK's client
	// (see plainCall); without it the call goes through the SDK.
	Definition json.RawMessage
	// PassThrough says that the caller answers a host with the result's
	// content, structuredContent, isError and _meta only, and sets the
	// result type itself (the gateway's pass-through). A plain call then
	// goes over the client's own connections (package plainhttp) and decodes a
	// result of the common shape in one pass, without its result type
	// (decodeCommon); without it a plain call goes through the
	// http.Client, as the executor's must. It changes nothing on the
	// SDK's path.
	PassThrough bool
	// Relay is what the call passes on from the server while it runs
	// (relay.go); nil passes nothing.
	Relay *Relay
	// Answers and State make the call the retry of one a server of
	// 2026-07-28 or later answered input_required, with the same Tool and
	// Args: the answers by input request id, and the server's requestState
	// as it sent it. Either is empty when the server's result had none
	// (the specification makes both optional). A retry goes through the
	// SDK; the server may ask again (ErrInputRequired).
	Answers mcp.InputResponseMap
	State   string
	// Raw asks for the exact bytes of the "result" member of the server's
	// response as well (rawcall.go), for a caller that must read the
	// result's numbers as written. A call asking for them goes through the
	// SDK, whose transports capture them; a pass-through call, whose
	// result the caller does not read itself, cannot ask for them.
	Raw bool
}

// errRawPassThrough refuses a call asking for both: the bytes are taken
// below the SDK's client, the one-pass decoding is made without it.
var errRawPassThrough = errors.New("a pass-through call returns no result bytes")

// Call makes the tools/call tc describes and returns the result as decoded
// (by the SDK's type, with structuredContent's numbers as float64), and
// with tc.Raw the bytes of the result as the server sent them: nil
// whenever they could not be bound to this call (a response larger than
// the capture bound, a path of the SDK that bypasses the capture), when
// the caller must treat the decoded result as possibly rounded. A call
// that does not ask for them does not pay for their capture.
//
// A result with IsError set is a normal return: the tool ran and failed.
// Otherwise every failure is a *CallError whose Kind is one of
// ErrOutcomeUnknown, ErrInputRequired (the result is returned too, without
// bytes), ErrRejected, ErrUnavailable or ErrClosed. A call still in flight
// when the client closes ends at once with ErrOutcomeUnknown. The call is
// never retried.
func (c *Client) Call(ctx context.Context, tc ToolCall) (*mcp.CallToolResult, json.RawMessage, error) {
	if tc.Raw && tc.PassThrough {
		return nil, nil, c.failed(methodCallTool, tc.Tool, ErrRejected, errRawPassThrough)
	}
	if tmpl := c.plainCall(ctx, &tc); tmpl != nil {
		res, err := c.callPlain(ctx, tmpl, tc.Tool, tc.Args, tc.PassThrough, tc.Relay)
		return res, nil, err
	}
	res, raw, err := c.callSDK(ctx, &tc)
	if err != nil {
		return res, nil, err
	}
	return res, raw, nil
}

// plainCall returns the template of tc made without the SDK's client
// (passcall.go), or nil when tc goes through the SDK. It is the one place
// the choice is made: a call is made plainly exactly when
//
//   - it asks nothing only the SDK's path gives: it is no retry (no
//     Answers, no State), which a plain request has no place for, and asks
//     for no result bytes (Raw), which only the SDK's transports capture;
//   - its Definition is given, binds no argument to an HTTP header, and
//     names the tool by a plain token (plainTool);
//   - the connection is streamable HTTP to a server of 2026-07-28 or later
//     without a session, whose tools/list the SDK has sent on it (the
//     template it copies, newPlainTemplate);
//   - ctx carries no trace context to pass on in _meta.
func (c *Client) plainCall(ctx context.Context, tc *ToolCall) *plainTemplate {
	if tc.Raw || len(tc.Answers) > 0 || tc.State != "" || c.http == nil {
		return nil
	}
	tmpl := c.plain.Load()
	if tmpl == nil || !plainTool(tc.Tool, tc.Definition) || len(tracing.InjectMeta(ctx, nil)) > 0 {
		return nil
	}
	return tmpl
}

// callSDK makes tc through the SDK's client, by request.
func (c *Client) callSDK(ctx context.Context, tc *ToolCall) (*mcp.CallToolResult, json.RawMessage, error) {
	params := &mcp.CallToolParams{Name: tc.Tool, InputResponses: tc.Answers, RequestState: tc.State}
	if trimmed := bytes.TrimSpace(tc.Args); len(trimmed) > 0 {
		if trimmed[0] != '{' || !json.Valid(trimmed) {
			return nil, nil, c.failed(methodCallTool, tc.Tool, ErrRejected, errors.New("arguments must be a JSON object"))
		}
		params.Arguments = json.RawMessage(trimmed)
	}
	return request(ctx, c, methodCallTool, tc.Tool, params, tc.Raw, tc.Relay, (*mcp.ClientSession).CallTool)
}
