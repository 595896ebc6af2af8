// Command demo runs the whole product on loopback and walks one money transfer from a question
// to the user, through a signed verdict, to an executed and audited call; then it shows a
// prompt-injection attempt that never reaches execution and a replay being refused.
//
//	go run ./examples/demo
//
// It builds verdictd, executor and the example bank MCP server, generates fresh keys in a
// temporary directory, starts the three as separate processes and talks to them over HTTP
// exactly as an agent host would. Nothing outside the temporary directory is touched.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	keep := flag.Bool("keep", false, "keep the temporary directory (keys, configs, bbolt files, logs)")
	flag.Parse()
	d, err := newDemo(*keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	err = d.run()
	d.stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "\ndemo failed:", err)
		fmt.Fprintln(os.Stderr, "logs are in", d.dir)
		os.Exit(1)
	}
}
