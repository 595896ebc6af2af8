package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	auditpkg "github.com/verdictgate/verdict/audit"
	"github.com/verdictgate/verdict/internal/cli"
)

// Exit codes of verdictd audit. An audit that could not read its sources says nothing about
// the records, so it never exits 0 or 1.
const (
	auditClean     = 0
	auditAnomalies = 1
	auditNoVerdict = 2 // bad usage, or a source that could not be read completely
)

const auditUsage = `usage: verdictd audit --decisions SRC [--decisions SRC ...] --executions SRC [--executions SRC ...]
                      [--token TOKEN | --token-file FILE] [--json] [flags]

Pairs verdictd's decision records with the executors' execution records by verdict id, prints
the counts and every anomaly, and exits 0 when there is none, 1 when there is any, and 2 when
the flags are wrong or a source cannot be read completely.

SRC is a bbolt file (read with a shared lock: the file of a running daemon is locked, read its
HTTP endpoint instead), a JSONL export, or a daemon's base URL (http(s)://host:port), read
with its admin token. Both flags repeat: records of several replicas and executors are merged,
and a record found in several sources is counted once. A daemon's export counts only when it
confirms its end (HTTP trailers; a proxy on the way must pass them). A JSONL file cannot prove it
is whole: that it is complete is the operator's responsibility.

flags:
`

func audit(args []string, stdout, stderr io.Writer) int {
	fs := cli.Flags("verdictd audit", auditUsage, stderr)
	var decisions, executions auditSources
	fs.Var(&decisions, "decisions", "decision records `SRC` (repeatable)")
	fs.Var(&executions, "executions", "execution records `SRC` (repeatable)")
	asJSON := fs.Bool("json", false, "print one JSON report object instead of the tables")
	src := newSourceFlags(fs)
	decisionsToken := fs.String("decisions-token", "", "admin `token` for HTTP decision sources, when verdictd's differs")
	executionsToken := fs.String("executions-token", "", "admin `token` for HTTP execution sources, when the executors' differs")
	grace := fs.Duration("started-grace", 0, "treat started records younger than `duration` as in flight, not as anomalies\n(auditing a live executor: at least its call_timeout)")
	if code, ok := cli.Parse(fs, args, auditNoVerdict); !ok {
		return code
	}
	usageError := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "verdictd audit: "+format+"\n", a...)
		fs.Usage()
		return auditNoVerdict
	}
	switch {
	case fs.NArg() > 0:
		return usageError("unexpected argument %q", fs.Arg(0))
	case len(decisions) == 0 || len(executions) == 0:
		return usageError("both --decisions and --executions are required")
	case src.check() != "":
		return usageError("%s", src.check())
	case *grace < 0:
		return usageError("--started-grace must not be negative")
	}
	if err := src.open(); err != nil {
		fmt.Fprintf(stderr, "verdictd audit: %v\n", err)
		return auditNoVerdict
	}
	dsrc, err := src.sources(decisions, *decisionsToken, false)
	if err != nil {
		return usageError("%v", err)
	}
	xsrc, err := src.sources(executions, *executionsToken, false)
	if err != nil {
		return usageError("%v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := auditpkg.Run(ctx, dsrc, xsrc, auditpkg.Options{StartedGrace: *grace})
	if err != nil {
		fmt.Fprintf(stderr, "verdictd audit: %v\n", err)
		hintLocked(stderr, "verdictd audit", err, "")
		fmt.Fprintln(stderr, "verdictd audit: no verdict on the records: the audit did not run to the end")
		return auditNoVerdict
	}

	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "verdictd audit: write report: %v\n", err)
		return auditNoVerdict
	}
	if !report.Clean {
		return auditAnomalies
	}
	return auditClean
}
