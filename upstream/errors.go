package upstream

import (
	"cmp"
	"errors"
	"fmt"
)

// Kinds of call failure. Every error returned by [Client.Call], and by
// the requests passed through (ReadResource, GetPrompt, Complete,
// Subscribe, Unsubscribe, SetLoggingLevel), matches exactly one of them
// under errors.Is; the executor's record depends on which. What they say
// of a tool they say of any request: a read cut short may have been
// served, one refused was not.
var (
	// ErrOutcomeUnknown: the request may have reached the server and the
	// tool may or may not have run (timeout, a connection lost once the
	// request was on it, child died mid-call, client closed mid-call).
	// Such a call must never be retried automatically.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrInputRequired: the server answered input_required, asking the
	// client for more input. The client does not answer it; the tool has
	// not completed.
	ErrInputRequired = errors.New("upstream input required")
	// ErrRejected: the call was refused, by the server with a JSON-RPC
	// error (unknown tool, bad parameters) or locally before sending
	// (arguments not a JSON object, a ToolCall asking for what no way of
	// sending it gives); nothing was executed.
	ErrRejected = errors.New("call rejected")
	// ErrUnavailable: the request was never sent. No connection to the
	// server could be used before the context ended, or an HTTP request
	// reached no connection: the dial was refused or failed, or a kept
	// connection was found closed before any of the request was written
	// and the new one could not be dialed (see sendtrace.go).
	ErrUnavailable = errors.New("server unavailable")
	// ErrClosed: the client was closed; the request was never sent.
	ErrClosed = errors.New("client closed")
)

// CallError describes a failed tool call, or another failed request.
type CallError struct {
	Server string // server id
	// Method is the request's MCP method; "" is tools/call.
	Method string
	// Tool is the tool called; for another method, what the request
	// names: a resource's URI, a prompt's name, a logging level.
	Tool string
	Kind error // one of the Err* kinds above
	Err  error // underlying cause, possibly nil
}

func (e *CallError) Error() string {
	method := cmp.Or(e.Method, methodCallTool)
	if e.Err == nil {
		return fmt.Sprintf("upstream %s: %s %s: %v", e.Server, method, e.Tool, e.Kind)
	}
	return fmt.Sprintf("upstream %s: %s %s: %v: %v", e.Server, method, e.Tool, e.Kind, e.Err)
}

// Unwrap lets errors.Is match the kind and errors.As reach the cause (for
// example a *jsonrpc.Error carrying the server's code).
func (e *CallError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}
