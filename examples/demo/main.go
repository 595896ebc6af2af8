// Command demo runs the whole product on loopback and walks one money transfer from a question
// to the user, through a signed verdict, to an executed and audited call; then it shows a
// prompt-injection attempt that never reaches execution and a replay being refused.
//
//	go run ./examples/demo
//
// It builds verdictd, executor and the example bank MCP server, generates fresh keys in a
// temporary directory, starts the three as separate processes and talks to them over HTTP
// exactly as an agent host would. Nothing outside the temporary directory is touched.
//
//	go run ./examples/demo -gateway
//
// drives the same transfer through mcpgate instead: a go-sdk MCP host connects to the gateway
// with the user's token, attaches the user's words to the call as trust-labelled segments in
// _meta, and answers the gateway's forms as the user; then the injection attempt, through the
// gateway too.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	keep := flag.Bool("keep", false, "keep the temporary directory (keys, configs, bbolt files, logs)")
	gateway := flag.Bool("gateway", false, "drive the transfer through mcpgate from an MCP host that sends the user's words in _meta")
	flag.Parse()
	d, err := newDemo(*keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	d.gateway = *gateway
	err = d.run()
	d.stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "\ndemo failed:", err)
		fmt.Fprintln(os.Stderr, "logs are in", d.dir)
		os.Exit(1)
	}
}
