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
//   - gated: bank.transfer through the gateway, verdictd and the executor, every value settled
//     without a question (from_account from the principal's pre-set data, amount and to_account
//     grounded in a _meta instruction, the action and its timing preset in the gateway config).
//     A call that asks the user anything counts as failed.
//
// For each mode it prints throughput, latency percentiles, the ratio of its p50 to direct's and
// what it adds, and the CPU each call cost every process (from /proc/<pid>/stat, summed over
// that mode's turns only): the load generator, the bank, mcpgate, verdictd and the executor.
//
//	go run ./bench/gateload -n 2000 -c 1
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
	flag.Parse()
	for _, m := range strings.Split(*modes, ",") {
		if _, ok := modeCalls[m]; !ok {
			fmt.Fprintf(os.Stderr, "gateload: unknown mode %q (want direct, read or gated)\n", m)
			os.Exit(2)
		}
		o.modes = append(o.modes, m)
	}
	for _, d := range strings.Split(*profile, ",") {
		if d != "mcpgate" && d != "verdictd" && d != "executor" {
			fmt.Fprintf(os.Stderr, "gateload: unknown daemon %q to profile (want mcpgate, verdictd or executor)\n", d)
			os.Exit(2)
		}
		o.profile = append(o.profile, d)
	}
	if o.n <= 0 || o.clients <= 0 || o.block <= 0 {
		fmt.Fprintln(os.Stderr, "gateload: -n, -c and -block must be positive")
		os.Exit(2)
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
}
