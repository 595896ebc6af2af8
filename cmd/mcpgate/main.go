// Command mcpgate is the MCP gateway: an MCP server (stdio or streamable
// HTTP) that re-exposes the policy's tool servers and puts every
// irreversible call through verdictd and the executor, asking the user
// through MCP elicitation. See package mcpgate for the design.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdin, stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "mcpgate: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: mcpgate <command> [flags]

commands:
  serve --config FILE [--stdio] [--observe]   run the gateway
        --stdio    serve MCP on stdin/stdout for the config's stdio_principal
                   (the HTTP listener, if configured, runs as well)
        --observe  observe mode; the config must also say mode: observe
`)
}
