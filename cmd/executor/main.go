// Command executor is the execution side of the gateway: it runs an MCP tool call only on a
// valid, unused verdict, and records everything it does and refuses.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/verdictgate/verdict/internal/buildinfo"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "keygen":
		return keygen(args[1:], stdout, stderr)
	case "grants":
		return grants(args[1:], stdout, stderr)
	case "vault":
		return vaultCmd(args[1:], stdout, stderr)
	case "version":
		return version(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "executor: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: executor <command> [flags]

commands:
  serve  --config FILE                 run the executor
  keygen --out DIR [--alg EdDSA|ES256] write the receipt key (signing.jwk) and its jwks.json
  grants list|revoke --url URL ...     list a principal's grants at a running executor, or revoke one
  vault rekey --config FILE            re-encrypt the grants to the vault's current key (executor stopped)
  version                              print the build: version, revision, Go toolchain
`)
}

// version prints the build: the module version, the revision and the toolchain.
func version(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: executor version")
		return 2
	}
	fmt.Fprintln(stdout, "executor", buildinfo.Read())
	return 0
}
