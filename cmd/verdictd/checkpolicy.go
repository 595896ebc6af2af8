package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/cli"
	"github.com/verdictgate/verdict/verdictd"
)

func checkPolicy(args []string, stdout, stderr io.Writer) int {
	fs := cli.Flags("verdictd check-policy", "usage: verdictd check-policy [--timeout D] [--previous FILE] FILE\n", stderr)
	timeout := fs.Duration("timeout", 15*time.Second, "bound on listing one server's tools")
	previous := fs.String("previous", "", "the policy file in force, to warn about a changed file under an unchanged policy_version")
	if code, ok := cli.Parse(fs, args, 2); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	rep, err := verdictd.CheckPolicy(context.Background(), fs.Arg(0), verdictd.CheckOptions{Timeout: *timeout, Previous: *previous})
	if err != nil {
		fmt.Fprintln(stderr, "verdictd check-policy:", err)
		return 1
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stdout, "warning: %s\n", w)
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintf(stderr, "%s: %d problem(s)\n", fs.Arg(0), len(rep.Problems))
		for _, p := range rep.Problems {
			fmt.Fprintln(stdout, p.In(fs.Arg(0)))
		}
		return 1
	}
	tools := 0
	for _, s := range rep.Servers {
		tools += len(s.Tools)
	}
	fmt.Fprintf(stdout, "policy %s: ok (%d servers, %d tools)\n", rep.Version, len(rep.Servers), tools)
	for _, s := range rep.Servers {
		fmt.Fprintf(stdout, "  %s: %s\n", s.ID, strings.Join(s.Tools, ", "))
	}
	for _, a := range rep.Approvals {
		fmt.Fprintf(stdout, "  approval of %s: %s\n", a.Tool, a.Rule)
	}
	for _, r := range rep.Relays {
		fmt.Fprintf(stdout, "  relay of %s: %s\n", r.Tool, r.Rule)
	}
	return 0
}
