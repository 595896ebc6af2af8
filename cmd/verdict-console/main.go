// Command verdict-console is the review console: a web application where approvers sign in at
// the organisation's OpenID Provider and approve or deny pending gated calls, and auditors read
// decision and execution records side by side (docs/console.md).
package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/verdictgate/verdict/console"
	"github.com/verdictgate/verdict/internal/cli"
	"github.com/verdictgate/verdict/internal/daemon"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return cli.Main("verdict-console", usage, map[string]cli.Command{"serve": serve}, args, stdout, stderr)
}

const usage = `usage: verdict-console <command> [flags]

commands:
  serve --config FILE   run the review console
  version               print the build: version, revision, Go toolchain
`

// serve runs the console. Its requests are a person's, few and light: it keeps Go's own
// garbage-collection target.
func serve(args []string, stdout, stderr io.Writer) int {
	return daemon.Command[console.Config]{
		Name:  "verdict-console",
		Load:  console.LoadConfig,
		Addrs: func(c *console.Config) (string, string) { return c.Listen, c.DebugListen },
		Start: func(ctx context.Context, cfg *console.Config, log *slog.Logger) (daemon.Server, daemon.ServeOptions, error) {
			svc, err := console.New(ctx, *cfg, console.Options{Logger: log})
			if err != nil {
				return nil, daemon.ServeOptions{}, err
			}
			// Above the 70s the console waits for verdictd.
			return svc, daemon.ServeOptions{TLS: cfg.TLS, WriteTimeout: 90 * time.Second}, nil
		},
	}.Run(args, stdout, stderr)
}
