// Command verdictd is the gate service: it runs the deterministic preflight over a proposed
// tool call, records every decision, and signs a verdict only for a call that is fully settled.
package main

import (
	"io"
	"os"

	"github.com/verdictgate/verdict/internal/cli"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return cli.Main("verdictd", usage, map[string]cli.Command{
		"serve":        serve,
		"keygen":       cli.Keygen("verdictd"),
		"check-policy": checkPolicy,
		"audit":        audit,
		"catalog":      catalog,
		"policy":       policyCmd,
	}, args, stdout, stderr)
}

const usage = `usage: verdictd <command> [flags]

commands:
  serve        --config FILE                    run the gate service
  keygen       --out DIR [--alg EdDSA|ES256]    write the signing key (signing.jwk) and its jwks.json
  check-policy FILE                             check a policy file and its servers' tool definitions
  audit        --decisions SRC --executions SRC pair decision records with execution records
  catalog      list|pin [--server ID] FILE      print the tools' definition digests, or the pins for them
  policy init  --config FILE [--out FILE] [--from DIR]
                                                write a first policy from the servers' tools (a diff when --out exists)
  policy test  [--coverage] [--min-coverage PCT] [--format text|json|junit] POLICY TESTS...
                                                run test cases against a policy, in process, with coverage
  policy replay --policy CANDIDATE --records SRC [--since T] [--tool SERVER/TOOL] [--format text|json]
                                                decide recorded preflights again under a candidate policy: the calls that would change
  version                                       print the build: version, revision, Go toolchain
`
