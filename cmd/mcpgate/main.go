// Command mcpgate is the MCP gateway: an MCP server (stdio or streamable
// HTTP) that re-exposes the policy's tool servers and puts every
// irreversible call through verdictd and the executor, asking the user
// through MCP elicitation. See package mcpgate for the design.
package main

import (
	"io"
	"os"

	"github.com/verdictgate/verdict/internal/cli"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	serveStdin := func(args []string, stdout, stderr io.Writer) int { return serve(args, stdin, stdout, stderr) }
	return cli.Main("mcpgate", usage, map[string]cli.Command{"serve": serveStdin}, args, stdout, stderr)
}

const usage = `usage: mcpgate <command> [flags]

commands:
  serve --config FILE [--stdio [--server ID]] [--observe]   run the gateway
        --stdio    serve MCP on stdin/stdout for the config's stdio_principal
                   (the HTTP listener, if configured, runs as well)
        --server   with --stdio: only server ID's tools, under its own names
                   (over HTTP: the endpoint /mcp/ID)
        --observe  observe mode; the config must also say mode: observe
  version                                     print the build: version, revision, Go toolchain
`
