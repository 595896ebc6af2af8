package upstream

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/tracing"
)

// Requests on a server's connection.
//
// A tool call is sent by one function, request, with the method and the
// SDK's call of it as parameters, so that any other request can be sent
// alike: each waits for a connection, is ended by Close, carries the
// caller's trace context in _meta, and fails with a *CallError of one kind
// of those Call documents, decided alike (classify). A result the SDK
// decodes is returned as it decoded it, with, when asked for, the exact
// bytes of the response's "result" member as the server sent them (see
// rawcall.go). Nothing is retried.

// request sends params, a request of method, on the current connection
// with send, the SDK's call of method. name is what the request names (a
// tool, a resource's URI, a prompt), for its errors. raw asks for the
// result's bytes: nil when they cannot be bound to this request (a
// response larger than the capture bound). A result that asks for input
// (a 2026-07-28 server's input_required) is returned with
// ErrInputRequired.
func request[P mcp.Params, R any](ctx context.Context, c *Client, method, name string, params P, raw bool,
	send func(*mcp.ClientSession, context.Context, P) (R, error)) (R, json.RawMessage, error) {
	var zero R
	// The trace context of the request goes on to the server in _meta
	// (traceparent, tracestate), as MCP carries W3C trace context; without
	// one nothing is added.
	params.SetMeta(tracing.InjectMeta(ctx, params.GetMeta()))
	var slot *rawSlot
	if raw {
		slot = &rawSlot{method: method}
		ctx = context.WithValue(ctx, rawKey{}, slot)
		defer slot.release()
	}
	cn, err := c.acquire(ctx)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return zero, nil, c.failed(method, name, ErrClosed, nil)
		}
		return zero, nil, c.failed(method, name, ErrUnavailable, err)
	}
	defer cn.inflight.Done()
	ctx, stop, err := c.bind(ctx)
	if err != nil {
		// Closed since acquire: nothing was sent.
		return zero, nil, c.failed(method, name, ErrClosed, nil)
	}
	defer stop()
	defer c.track(askerOf(ctx))()
	end := newStreamEnd()
	sctx, sent := withSendTrace(context.WithValue(ctx, streamEndKey{}, end), method)
	res, err := send(cn.sess, sctx, params)
	if err == nil {
		end.wait(ctx) // see streamend.go
	}
	if re := (*requestError)(nil); errors.As(err, &re) {
		return zero, nil, c.failed(method, name, ErrRejected, re.err)
	}
	if err != nil {
		kind := classify(ctx, err)
		if kind == ErrOutcomeUnknown && neverSent(err, sent) {
			kind = ErrUnavailable
		}
		if kind != ErrRejected && ctx.Err() == nil {
			// The transport failed: reconnect now rather than when the
			// session notices.
			c.retire(cn, err)
		}
		return zero, nil, c.failed(method, name, kind, closedInFlight(ctx, err))
	}
	var b json.RawMessage
	if slot != nil {
		slot.release()
		b = slot.take()
	}
	if r, ok := any(res).(interface{ NeedsInput() bool }); ok && r.NeedsInput() {
		return res, b, c.failed(method, name, ErrInputRequired, nil)
	}
	return res, b, nil
}

// failed is the error of a request of method naming name.
func (c *Client) failed(method, name string, kind, err error) *CallError {
	return &CallError{Server: c.id, Method: method, Tool: name, Kind: kind, Err: err}
}
