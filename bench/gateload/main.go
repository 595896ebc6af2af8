// Command gateload measures what mcpgate adds to a tool call, as a host sees it: the same
// go-sdk client calls the example bank directly and through the gateway, interleaved in one run
// so that both meet the same machine.
//
// It builds mcpgate, verdictd, the executor and the bank, starts them as separate processes on
// loopback with fresh keys in a temporary directory, and drives them from -c closed-loop
// clients, each a go-sdk client with one session to the bank and one to the gateway, over
// streamable HTTP. Three modes run in turns of -block calls each until every mode made -n:
//
//   - direct: get_balance straight to the bank;
//   - read: bank.get_balance through the gateway's read pass-through;
//   - gated: bank.list_transactions, classed irreversible, through the gateway, verdictd and the
//     executor, every value settled without a question (account from the principal's pre-set
//     data, limit grounded in a _meta instruction, the action and its timing preset in the
//     gateway config). A call that asks the user anything counts as failed.
//
// For each mode it prints throughput, latency percentiles, the ratio of its p50 to direct's and
// what it adds, and the CPU each call cost every process (from /proc/<pid>/stat, summed over
// that mode's turns only): the load generator, the bank, mcpgate, verdictd and the executor.
//
// With -base REV it measures a change against a base revision in the same run: it checks REV
// out into a temporary detached git worktree, builds the same four binaries from it, removes
// the worktree, and starts a second, complete stack from them (its own directory, ports and
// keys), with -c hosts of its own. In every turn each mode runs on the current stack and on
// the base, the one going first alternating from turn to turn, and each stack's CPU is summed
// over its own turns only. The base's lines name the mode MODE@base, and a "ratio MODE" line
// gives the current over the base: the daemons' CPU per call (mcpgate, verdictd and executor),
// p50, the p50 added over the same stack's direct, and throughput.
//
// When gated runs (-floors, on by default), gateload measures between turns, in its own
// process and on its own thread's CPU time, what a gated call cannot do without: a durable
// bbolt commit (a 1 KiB put, opened as the daemons' stores are) and an ed25519 signature and
// verification of a 600-byte message. The "floor" line gives their CPU per operation and the
// gated floor, three commits, two signatures and two verifications; a "floor_ratio" line per
// stack sets the daemons' CPU per gated call against it.
//
//	go run ./bench/gateload -n 2000 -c 1
//	go run ./bench/gateload -n 1000 -c 1 -base main
//	go run ./bench/gateload -n 1000 -c 8 -base main
//	go run ./bench/gateload -n 2000 -c 1 -modes direct,read -cpuprofile gate.pprof
//	go run ./bench/gateload -n 600 -modes gated -cpuprofile gated -profile mcpgate,verdictd,executor
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	var o options
	flag.IntVar(&o.n, "n", 2000, "calls per mode")
	flag.IntVar(&o.clients, "c", 1, "concurrent clients (each with its own sessions)")
	flag.IntVar(&o.block, "block", 100, "calls of one mode in a turn before the next mode's")
	modes := flag.String("modes", "direct,read,gated", "comma-separated modes to run: direct, read, gated")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (configs and logs)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of each -profile daemon during the run to `file` (with one daemon) or file.NAME.pprof (with more), served on a loopback debug_listen")
	profile := flag.String("profile", "mcpgate", "comma-separated daemons -cpuprofile covers: mcpgate, verdictd, executor")
	flag.IntVar(&o.profsec, "profsec", 5, "seconds the -cpuprofile covers, from the start of the load")
	flag.BoolVar(&o.spans, "spans", false, "run the daemons with tracing on, into a local OTLP endpoint that prints each span's p50 and p90 after the run: where the wall time goes (tracing costs CPU, and a traced upstream call takes the SDK's path)")
	flag.StringVar(&o.gogc, "gogc", "", "GOGC `value` for the daemons (default: their own, 400)")
	flag.StringVar(&o.base, "base", "", "also build and run a second stack from git revision `rev` (main, main~3, a hash), interleaved with this one, and print each mode's ratios to it")
	flag.BoolVar(&o.floors, "floors", true, "when gated runs, measure between turns the CPU of a durable bbolt commit and of ed25519 signing and verifying, and set the gated call's daemon CPU against them")
	flag.Parse()
	o.modes, o.profile = strings.Split(*modes, ","), strings.Split(*profile, ",")
	for _, m := range o.modes {
		if _, ok := modeCalls[m]; !ok {
			fmt.Fprintf(os.Stderr, "gateload: unknown mode %q (want direct, read or gated)\n", m)
			os.Exit(2)
		}
	}
	for _, d := range o.profile {
		if d != "mcpgate" && d != "verdictd" && d != "executor" {
			fmt.Fprintf(os.Stderr, "gateload: unknown daemon %q to profile (want mcpgate, verdictd or executor)\n", d)
			os.Exit(2)
		}
	}
	if o.n <= 0 || o.clients <= 0 || o.block <= 0 {
		fmt.Fprintln(os.Stderr, "gateload: -n, -c and -block must be positive")
		os.Exit(2)
	}
	if o.base != "" {
		if strings.HasPrefix(o.base, "-") {
			fmt.Fprintf(os.Stderr, "gateload: -base %q is not a revision\n", o.base)
			os.Exit(2)
		}
		// Tracing and profiling cost CPU of their own; one stack with them would not compare.
		if o.spans || o.cpuprofile != "" {
			fmt.Fprintln(os.Stderr, "gateload: -spans and -cpuprofile measure one stack: run them without -base")
			os.Exit(2)
		}
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "gateload:", err)
		os.Exit(1)
	}
}

// options is what the flags chose.
type options struct {
	n, clients, block int
	modes             []string
	keep              bool
	cpuprofile        string
	profile           []string // the daemons -cpuprofile covers
	profsec           int
	gogc              string
	spans             bool
	base              string // the base revision, or none
	floors            bool
}
