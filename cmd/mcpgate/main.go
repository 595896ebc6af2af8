// Command mcpgate is the MCP gateway: an MCP server (stdio or streamable
// HTTP) that re-exposes the policy's tool servers and puts every
// irreversible call through verdictd and the executor, asking the user
// through MCP elicitation. See package mcpgate for the design.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/verdictgate/verdict/internal/buildinfo"
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
	case "version":
		return version(args[1:], stdout, stderr)
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
  serve --config FILE [--stdio [--server ID]] [--observe]   run the gateway
        --stdio    serve MCP on stdin/stdout for the config's stdio_principal
                   (the HTTP listener, if configured, runs as well)
        --server   with --stdio: only server ID's tools, under its own names
                   (over HTTP: the endpoint /mcp/ID)
        --observe  observe mode; the config must also say mode: observe
  version                                     print the build: version, revision, Go toolchain
`)
}

// version prints the build: the module version, the revision and the toolchain.
func version(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: mcpgate version")
		return 2
	}
	fmt.Fprintln(stdout, "mcpgate", buildinfo.Read())
	return 0
}
