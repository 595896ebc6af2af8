package mcpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/rawjson"
)

// methodCallTool is the JSON-RPC method whose params the raw check reads.
const methodCallTool = "tools/call"

// screenMessage applies the raw check to one decoded JSON-RPC message, in
// place: a tools/call's params as the MCP library will decode them (the
// params bytes of the message it decoded) become, when unsound, the
// params of a call the tool handler refuses. It reports whether it
// changed anything.
func screenMessage(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != methodCallTool {
		return false
	}
	out, pe := screenParams(req.Params)
	if pe == nil {
		return false
	}
	req.Params = out
	return true
}

// screenedTransport applies the raw check to every message a stdio host
// sends, after the library has framed and decoded it and before the
// server reads it. Every message of a batch is screened on its own.
type screenedTransport struct{ t mcp.Transport }

func (s screenedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := s.t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return screenedConn{c}, nil
}

type screenedConn struct{ mcp.Connection }

func (c screenedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		screenMessage(msg)
	}
	return msg, err
}

// maxBodyBytes is the largest HTTP request body read, the MCP library's
// own bound on /mcp.
const maxBodyBytes = mcp.DefaultMaxRequestBodyBytes

// errBody is a request body the raw check refuses whole.
var errBody = errors.New("the request repeats a member name outside a tool call's params, or cannot be read exactly")

// screenBody applies the raw check to an HTTP request body: one JSON-RPC
// message or a batch. A body without a repeated member name anywhere is
// returned as it is, the same bytes. Otherwise each tools/call whose
// params hold the problem is rewritten (see screenParams); a body that
// still holds a repeated name after that — in a message's envelope (two
// "params", say), in a message that is not a tools/call — or that does
// not read as JSON-RPC, is refused whole (errBody): the library would
// pick one of two values where the gateway cannot tell which.
func screenBody(body []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(body)
	batch := len(trimmed) > 0 && trimmed[0] == '['
	// Params sit one level down in a message and two in a batch: the
	// nesting bound is the same as screenParams'.
	maxDepth := maxParamsDepth + 1
	if batch {
		maxDepth = maxParamsDepth + 2
	}
	err := rawjson.Check(body, maxDepth)
	if err == nil {
		return body, nil
	}
	if !errors.Is(err, rawjson.ErrDuplicateMember) && !errors.Is(err, rawjson.ErrTooDeep) {
		return nil, errBody
	}
	elems := []json.RawMessage{trimmed}
	if batch {
		elems = nil
		if err := json.Unmarshal(trimmed, &elems); err != nil {
			return nil, errBody
		}
	}
	for i, elem := range elems {
		msg, err := jsonrpc.DecodeMessage(elem)
		if err != nil {
			return nil, errBody
		}
		if !screenMessage(msg) {
			continue
		}
		if elems[i], err = jsonrpc.EncodeMessage(msg); err != nil {
			return nil, errBody
		}
	}
	out := []byte(elems[0])
	if batch {
		parts := make([][]byte, len(elems))
		for i, e := range elems {
			parts[i] = e
		}
		out = slices.Concat([]byte("["), bytes.Join(parts, []byte(",")), []byte("]"))
	}
	if rawjson.Check(out, maxDepth) != nil {
		return nil, errBody
	}
	return out, nil
}

// screenHTTP applies the raw check to the body of every POST on /mcp
// before either of the library's handlers reads it. A body the check
// passes unchanged is offered to first, which serves it or leaves it (and
// reports which) before next sees it.
func screenHTTP(next http.Handler, first func(http.ResponseWriter, *http.Request, []byte) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		out, err := screenBody(body)
		if err != nil {
			httpx.WriteJSON(w, http.StatusBadRequest, rpcError(nil, jsonrpc.CodeInvalidRequest, err.Error(), api.ReasonMetaInvalid))
			return
		}
		// Only a body the check returned as it is (the same bytes, not a rewrite).
		if unchanged := len(out) > 0 && len(out) == len(body) && &out[0] == &body[0]; first != nil && unchanged && first(w, r, out) {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(out))
		r.ContentLength = int64(len(out))
		next.ServeHTTP(w, r)
	})
}

// screened refuses a call the raw check marked (metaRefused in _meta)
// before h sees it.
func (g *Gateway) screened(name string, h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		v, ok := req.Params.Meta[metaRefused]
		if !ok {
			return h(ctx, req)
		}
		start := time.Now()
		reason := api.ReasonMetaInvalid
		text := "The app sent this request with a detail named twice, so what it asks cannot be read exactly." + nothingDone
		if v == api.ReasonArgumentsInvalid {
			reason = api.ReasonArgumentsInvalid
			text = "The request's details name one value twice, so they cannot be read exactly." + nothingDone
		}
		g.log.Warn("tools/call refused on its raw params", "tool", name, "reason", reason)
		res := toolError(reason, text)
		if x, ok := g.lookup(name); ok {
			g.count(g.policy().Tool(x.Server, x.Tool).EffectiveClass(), res, start)
		}
		return res, nil
	}
}
