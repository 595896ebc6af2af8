// Command verdictd is the gate service: it runs the deterministic preflight over a proposed
// tool call, records every decision, and signs a verdict only for a call that is fully settled.
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
	case "check-policy":
		return checkPolicy(args[1:], stdout, stderr)
	case "audit":
		return audit(args[1:], stdout, stderr)
	case "catalog":
		return catalog(args[1:], stdout, stderr)
	case "policy":
		return policyCmd(args[1:], stdout, stderr)
	case "version":
		return version(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "verdictd: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: verdictd <command> [flags]

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
  version                                       print the build: version, revision, Go toolchain
`)
}

// version prints the build: the module version, the revision and the toolchain.
func version(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: verdictd version")
		return 2
	}
	fmt.Fprintln(stdout, "verdictd", buildinfo.Read())
	return 0
}
