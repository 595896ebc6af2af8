// Command executor is the execution side of the gateway: it runs an MCP tool call only on a
// valid, unused verdict, and records everything it does and refuses.
package main

import (
	"io"
	"os"

	"github.com/verdictgate/verdict/internal/cli"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return cli.Main("executor", usage, map[string]cli.Command{
		"serve":  serve,
		"keygen": cli.Keygen("executor"),
		"grants": grants,
		"vault":  vaultCmd,
	}, args, stdout, stderr)
}

const usage = `usage: executor <command> [flags]

commands:
  serve  --config FILE                 run the executor
  keygen --out DIR [--alg EdDSA|ES256] write the receipt key (signing.jwk) and its jwks.json
  grants list|revoke --url URL ...     list a principal's grants at a running executor, or revoke one
  vault rekey --config FILE            re-encrypt the grants to the vault's current key (executor stopped)
  version                              print the build: version, revision, Go toolchain
`
