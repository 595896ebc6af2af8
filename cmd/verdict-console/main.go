// Command verdict-console is the review console: a web application where approvers sign in at
// the organisation's OpenID Provider and approve or deny pending gated calls, and auditors read
// decision and execution records side by side (docs/console.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/verdictgate/verdict/console"
	"github.com/verdictgate/verdict/internal/buildinfo"
	"github.com/verdictgate/verdict/internal/daemon"
	"github.com/verdictgate/verdict/internal/httpx"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "version":
		if len(args) > 1 {
			fmt.Fprintln(stderr, "usage: verdict-console version")
			return 2
		}
		fmt.Fprintln(stdout, "verdict-console", buildinfo.Read())
		return 0
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "verdict-console: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: verdict-console <command> [flags]

commands:
  serve --config FILE   run the review console
  version               print the build: version, revision, Go toolchain
`)
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("verdict-console serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path, code, ok := daemon.ConfigFlag(fs, args, "verdict-console serve --config FILE")
	if !ok {
		return code
	}
	cfg, err := console.LoadConfig(path)
	if err != nil {
		fmt.Fprintln(stderr, "verdict-console:", err)
		return 1
	}
	log := daemon.Logger(stderr, "verdict-console")
	if err := daemon.TrustRoots(os.Getenv, log); err != nil {
		log.Error("start", "error", err.Error())
		return 1
	}
	svc, err := console.New(*cfg, console.Options{Logger: log})
	if err != nil {
		log.Error("start", "error", err.Error())
		return 1
	}
	// Both listeners are bound before anything is served: an address that cannot be bound
	// stops the start, never a console half up.
	ln, err := daemon.Listen(path, "listen", cfg.Listen)
	if err != nil {
		log.Error("start", "error", err.Error())
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if cfg.DebugListen != "" {
		dln, err := daemon.Listen(path, "debug_listen", cfg.DebugListen)
		if err != nil {
			ln.Close()
			log.Error("start", "error", err.Error())
			return 1
		}
		go func() {
			if err := httpx.ServeDebug(ctx, dln, log); err != nil {
				log.Error("debug_listen", "error", err.Error())
			}
		}()
	}
	err = daemon.Serve(ctx, svc, daemon.ServeOptions{
		Listener:     ln,
		TLS:          cfg.TLS,
		WriteTimeout: 90 * time.Second, // above the 70s the console waits for verdictd
		Logger:       log,
	})
	if err != nil {
		log.Error("serve", "error", err.Error())
		return 1
	}
	return 0
}
