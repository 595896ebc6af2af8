package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/verdictgate/verdict/internal/cli"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/replay"
)

// Exit codes of verdictd policy replay.
const (
	replaySame    = 0 // no replayed call changes its outcome
	replayChanged = 1 // some call does
	replayError   = 2 // bad flags, a policy that does not load, a source not read to its end
)

const replayUsage = `usage: verdictd policy replay --policy CANDIDATE --records SRC [--records SRC ...]
                             [--since T] [--tool SERVER/TOOL ...] [--format text|json] [flags]

Decides the recorded preflights of SRC again under the candidate policy, in process, and
reports the calls whose outcome would change (now allowed first, then now refused, then the
others, with the slots each would now ask about) and a summary per tool. Only records kept
with records.capture_requests on can be decided again; the others are counted as not
replayable. Exit 0 when no outcome changes, 1 when one does, 2 on bad flags, a policy that
does not load or a source that cannot be read to its end.

SRC is read as verdictd audit reads it: a bbolt file, a JSONL export, or a daemon's base URL
with its admin token (docs/policy-testing.md).

flags:
`

func policyReplay(args []string, stdout, stderr io.Writer) int {
	fs := cli.Flags("verdictd policy replay", replayUsage, stderr)
	var sources, tools auditSources
	candidate := fs.String("policy", "", "the candidate policy `file`")
	fs.Var(&sources, "records", "decision records `SRC` (repeatable)")
	fs.Var(&tools, "tool", "replay only this `server/tool` or tool name (repeatable)")
	since := fs.String("since", "", "replay only records decided at or after this RFC 3339 `time`")
	format := fs.String("format", replay.FormatText, "the report's format: "+strings.Join(replay.Formats, ", "))
	src := newSourceFlags(fs)
	if code, ok := cli.Parse(fs, args, replayError); !ok {
		return code
	}
	usageError := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "verdictd policy replay: "+format+"\n", a...)
		fs.Usage()
		return replayError
	}
	var opts replay.Options
	switch {
	case fs.NArg() > 0:
		return usageError("unexpected argument %q", fs.Arg(0))
	case *candidate == "" || len(sources) == 0:
		return usageError("--policy and --records are required")
	case src.check() != "":
		return usageError("%s", src.check())
	case !slices.Contains(replay.Formats, *format):
		return usageError("unknown format %q", *format)
	}
	if *since != "" {
		t, err := time.Parse(time.RFC3339Nano, *since)
		if err != nil {
			return usageError("--since must be an RFC 3339 time: %v", err)
		}
		opts.Since = t
	}
	opts.Tools = tools
	pol, err := policy.Load(*candidate)
	if err != nil {
		fmt.Fprintf(stderr, "verdictd policy replay: %v\n", err)
		return replayError
	}
	if err := src.open(); err != nil {
		fmt.Fprintf(stderr, "verdictd policy replay: %v\n", err)
		return replayError
	}
	srcs, err := src.sources(sources, "", true)
	if err != nil {
		return usageError("%v", err)
	}
	r, err := replay.New(pol)
	if err != nil {
		fmt.Fprintf(stderr, "verdictd policy replay: %v\n", err)
		return replayError
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := r.Run(ctx, srcs, opts)
	if err != nil {
		fmt.Fprintf(stderr, "verdictd policy replay: %v\n", err)
		hintLocked(stderr, "verdictd policy replay", err, "records")
		return replayError
	}
	if err := rep.Write(stdout, *format); err != nil {
		fmt.Fprintf(stderr, "verdictd policy replay: write report: %v\n", err)
		return replayError
	}
	if rep.Changed > 0 {
		return replayChanged
	}
	return replaySame
}
