// Command echoserver is the fastest MCP tool there is: `echo` returns its arguments. The executor
// load tool calls it so that what is measured is the executor (verification, nonce, durable
// records, the MCP round trip), not a tool's own work.
//
//	echoserver            # stdio
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const schema = `{"type":"object","properties":{"account":{"type":"string"}},"required":["account"],"additionalProperties":false}`

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        "echo",
		Description: "Return the arguments unchanged.",
		InputSchema: json.RawMessage(schema),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "echoserver:", err)
		os.Exit(1)
	}
}
