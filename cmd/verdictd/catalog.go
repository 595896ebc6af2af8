package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/cli"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/verdictd"
)

// catalog lists the policy's servers as serve would and prints each tool's definition digest
// and pin status (list), or the pins section that holds the tools to what is listed now (pin).
func catalog(args []string, stdout, stderr io.Writer) int {
	const usage = "usage: verdictd catalog list [--server ID]... [--timeout D] POLICY\n" +
		"       verdictd catalog pin [--server ID]... [--all] [--out FILE] [--timeout D] POLICY\n"
	if len(args) == 0 || (args[0] != "list" && args[0] != "pin") {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd := args[0]
	fs := cli.Flags("verdictd catalog "+cmd, usage, stderr)
	var servers []string
	fs.Func("server", "only this server (repeatable)", func(s string) error { servers = append(servers, s); return nil })
	timeout := fs.Duration("timeout", 15*time.Second, "bound on listing one server's tools")
	all := fs.Bool("all", false, "pin: pin each server whole (all: true), so that a tool it adds later is held back too")
	out := fs.String("out", "", "pin: write the pins section to FILE instead of stdout")
	if code, ok := cli.Parse(fs, args[1:], 2); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	rep, err := verdictd.CheckPolicy(context.Background(), fs.Arg(0), verdictd.CheckOptions{Timeout: *timeout})
	if err != nil {
		fmt.Fprintln(stderr, "verdictd catalog:", err)
		return 1
	}
	if rep.Version == "" && len(rep.Problems) > 0 {
		for _, p := range rep.Problems {
			fmt.Fprintln(stderr, p.In(fs.Arg(0)))
		}
		return 1
	}
	var picked []verdictd.ServerReport
	for _, s := range rep.Servers {
		if len(servers) == 0 || slices.Contains(servers, s.ID) {
			picked = append(picked, s)
		}
	}
	for _, id := range servers {
		if !slices.ContainsFunc(picked, func(s verdictd.ServerReport) bool { return s.ID == id }) {
			fmt.Fprintf(stderr, "verdictd catalog: the policy has no server %q\n", id)
			return 1
		}
	}
	if cmd == "list" {
		return list(picked, stdout)
	}
	return pin(picked, *all, *out, stdout, stderr)
}

func list(servers []verdictd.ServerReport, stdout io.Writer) int {
	held := 0
	fmt.Fprintf(stdout, "%-12s %-28s %-71s %s\n", "SERVER", "TOOL", "DIGEST", "PIN")
	for _, s := range servers {
		if len(s.Definitions) == 0 {
			fmt.Fprintf(stdout, "%-12s %-28s %-71s %s\n", s.ID, "-", "-", "NOT LISTED (verdictd check-policy says why)")
			held++
		}
		for _, d := range s.Definitions {
			status := "-"
			switch {
			case errors.Is(d.Held, policy.ErrPinMismatch):
				status, held = "CHANGED (pinned "+d.Pinned+")", held+1
			case errors.Is(d.Held, policy.ErrUnpinned):
				status, held = "UNPINNED (server pinned whole)", held+1
			case d.Pinned != "":
				status = "pinned"
			}
			fmt.Fprintf(stdout, "%-12s %-28s %-71s %s\n", s.ID, d.Name, cmp.Or(d.Digest, "(unusable definition)"), status)
		}
	}
	if held > 0 {
		return 1
	}
	return 0
}

// pin prints the policy's pins section for the servers' tools as listed now.
func pin(servers []verdictd.ServerReport, all bool, out string, stdout, stderr io.Writer) int {
	var b strings.Builder
	b.WriteString("pins:\n")
	for _, s := range servers {
		if len(s.Definitions) == 0 {
			fmt.Fprintf(stderr, "verdictd catalog: server %s did not list its tools; nothing to pin\n", s.ID)
			return 1
		}
		fmt.Fprintf(&b, "  %s:\n", s.ID)
		if all {
			b.WriteString("    all: true\n")
		}
		b.WriteString("    tools:\n")
		for _, d := range s.Definitions {
			if d.Digest == "" {
				fmt.Fprintf(stderr, "verdictd catalog: %s/%s has an unusable definition; not pinned\n", s.ID, d.Name)
				continue
			}
			fmt.Fprintf(&b, "      %q: %q\n", d.Name, d.Digest)
		}
	}
	if out == "" {
		io.WriteString(stdout, b.String())
		return 0
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(stderr, "verdictd catalog:", err)
		return 1
	}
	return 0
}
