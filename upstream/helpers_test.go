package upstream

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callTool is c.Call of tool with args, asking nothing more of the call.
func callTool(ctx context.Context, c *Client, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	res, _, err := c.Call(ctx, ToolCall{Tool: tool, Args: args})
	return res, err
}

func mustCall(t testing.TB, id int64) jsonrpc.Message {
	jid, err := jsonrpc.MakeID(float64(id))
	if err != nil {
		t.Fatal(err)
	}
	return &jsonrpc.Request{ID: jid, Method: methodListTools}
}

// chunkReader returns data at most n bytes at a time, like a network.
type chunkReader struct {
	data []byte
	n    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n, len(r.data))
	copy(p, r.data[:k])
	r.data = r.data[k:]
	return k, nil
}

func ioNopCloser(r io.Reader) io.ReadCloser { return io.NopCloser(r) }
