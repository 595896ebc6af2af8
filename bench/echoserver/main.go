// Command echoserver is the fastest MCP tool there is: `echo` returns its arguments. The executor
// load tool calls it so that what is measured is the executor (verification, nonce, durable
// records, the MCP round trip), not a tool's own work.
//
//	echoserver            # stdio, a minimal newline-delimited JSON-RPC server
//	echoserver -sdk       # stdio, the same tool served by the go-sdk
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const schema = `{"type":"object","properties":{"account":{"type":"string"}},"required":["account"],"additionalProperties":false}`

func main() {
	sdk := flag.Bool("sdk", false, "serve with the go-sdk instead of the minimal server")
	flag.Parse()
	var err error
	if *sdk {
		err = newSDKServer().Run(context.Background(), &mcp.StdioTransport{})
	} else {
		err = serveMinimal(os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "echoserver:", err)
		os.Exit(1)
	}
}

// newSDKServer returns the go-sdk server with the echo tool.
func newSDKServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        "echo",
		Description: "Return the arguments unchanged.",
		InputSchema: json.RawMessage(schema),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	return s
}
