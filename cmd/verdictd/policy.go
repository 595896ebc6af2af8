package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/verdictgate/verdict/internal/cli"
	"github.com/verdictgate/verdict/policytest"
)

// policyCmd is the policy command group: one case per subcommand.
func policyCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		policyUsage(stderr)
		return 2
	}
	switch args[0] {
	case "init":
		return policyInit(args[1:], stdout, stderr)
	case "test":
		return policyTest(args[1:], stdout, stderr)
	case "replay":
		return policyReplay(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		policyUsage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "verdictd policy: unknown command %q\n", args[0])
	policyUsage(stderr)
	return 2
}

func policyUsage(w io.Writer) {
	fmt.Fprint(w, `usage: verdictd policy <command> [flags]

commands:
  init --config FILE [--out FILE] [--from DIR] [--timeout D]
                write a first policy for the servers FILE declares, from their tools as listed
                (or as saved in DIR); when --out exists, print how it differs instead (docs/operations.md)
  test [--coverage] [--min-coverage PCT] [--format text|json|junit] POLICY TESTS...
                run the test files' cases against the policy, in process (docs/policy-testing.md)
  replay --policy CANDIDATE --records SRC [--since T] [--tool SERVER/TOOL] [--format text|json]
                decide the recorded preflights again under a candidate policy and report the calls
                whose outcome would change (docs/policy-testing.md#replaying-recorded-preflights)
`)
}

// policyTest runs test files against a policy: exit 0 when every case passed (and, with
// --min-coverage, enough was covered), 1 when not or when a file does not load, 2 on bad flags.
func policyTest(args []string, stdout, stderr io.Writer) int {
	fs := cli.Flags("verdictd policy test", "usage: verdictd policy test [--coverage] [--min-coverage PCT] [--format text|json|junit] POLICY TESTS...\n", stderr)
	coverage := fs.Bool("coverage", false, "report what of the policy no case exercised")
	minCoverage := fs.Float64("min-coverage", 0, "with --coverage: fail when less than this percentage of the policy was exercised")
	format := fs.String("format", policytest.FormatText, "the report's format: "+strings.Join(policytest.Formats, ", "))
	if code, ok := cli.Parse(fs, args, 2); !ok {
		return code
	}
	switch {
	case fs.NArg() < 2:
		fs.Usage()
		return 2
	case !slices.Contains(policytest.Formats, *format):
		fmt.Fprintf(stderr, "verdictd policy test: unknown format %q\n", *format)
		return 2
	case *minCoverage < 0 || *minCoverage > 100 || *minCoverage > 0 && !*coverage:
		fmt.Fprintln(stderr, "verdictd policy test: --min-coverage is a percentage, 0 to 100, and needs --coverage")
		return 2
	}
	rep, err := policytest.RunFiles(context.Background(), fs.Arg(0), fs.Args()[1:], *coverage)
	if err != nil {
		fmt.Fprintln(stderr, "verdictd policy test:", err)
		return 1
	}
	rep.RequireCoverage(*minCoverage)
	if err := rep.Write(stdout, *format); err != nil {
		fmt.Fprintln(stderr, "verdictd policy test:", err)
		return 1
	}
	if rep.Failed > 0 {
		return 1
	}
	if rep.Coverage != nil && rep.Coverage.Short {
		fmt.Fprintf(stderr, "verdictd policy test: coverage %.1f%% is under --min-coverage %g%%\n", rep.Coverage.Percent, *minCoverage)
		return 1
	}
	return 0
}
