package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/daemon"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/mcpgate"
)

func serve(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcpgate serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stdio := fs.Bool("stdio", false, "serve MCP on stdin/stdout")
	server := fs.String("server", "", "with --stdio: offer only this server's tools, under its own names")
	observe := fs.Bool("observe", false, "observe mode (the config must say mode: observe too)")
	configPath, code, ok := daemon.ConfigFlag(fs, args, "mcpgate serve --config FILE [--stdio [--server ID]] [--observe]")
	if !ok {
		return code
	}
	cfg, err := mcpgate.LoadConfig(configPath)
	if err != nil {
		fmt.Fprintln(stderr, "mcpgate:", err)
		return 1
	}
	if *server != "" && !*stdio {
		fmt.Fprintln(stderr, "mcpgate: --server chooses what --stdio offers; over HTTP each server has its own endpoint, /mcp/<server>")
		return 2
	}
	if !*stdio && cfg.Listen == "" {
		fmt.Fprintln(stderr, "mcpgate: nothing to serve: set listen in the config or pass --stdio")
		return 2
	}
	// stdout carries the protocol under --stdio: everything else goes to
	// stderr, as JSON log records, upstream servers' stderr lines included.
	log := daemon.Logger(stderr, "mcpgate")
	fail := func(stage string, err error) int {
		log.Error(stage, "error", err.Error())
		return 1
	}
	daemon.TuneGC(os.Getenv, log)
	if err := daemon.TrustRoots(os.Getenv, log); err != nil {
		return fail("start", err)
	}
	// SIGHUP asks for a policy reload. Until the handler below is in
	// place it must not end the process (its default action); a change it
	// announced meanwhile is picked up by the policy file watcher.
	signal.Ignore(syscall.SIGHUP)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// debug_listen is bound before anything else starts, so that an address that cannot be bound
	// stops the start at its config key and line, as listen does.
	if cfg.DebugListen != "" {
		debugLn, err := daemon.Listen(configPath, "debug_listen", cfg.DebugListen)
		if err != nil {
			return fail("start", err)
		}
		go func() {
			if err := httpx.ServeDebug(ctx, debugLn, log); err != nil {
				log.Error("debug listener", "error", err.Error())
			}
		}()
	}
	gw, err := mcpgate.New(ctx, *cfg, mcpgate.Options{Observe: *observe, Logger: log, Getenv: os.Getenv, StdioServer: *server})
	if err != nil {
		return fail("start", err)
	}
	log.Info("started", "mode", gw.Mode(), "policy_version", gw.PolicyVersion())
	reload := func() { _ = gw.Reload(ctx) } // logged and counted by Reload
	serveHTTP := func(ctx context.Context, ln net.Listener) error {
		return daemon.Serve(ctx, gw, daemon.ServeOptions{
			Listener:     ln,
			TLS:          cfg.TLS,
			WriteTimeout: 0, // streams and elicitation rounds have no fixed length
			Logger:       log,
			OnSIGHUP:     reload,
			OnShutdown:   gw.CloseSessions,
		})
	}
	if !*stdio {
		ln, err := daemon.Listen(configPath, "listen", cfg.Listen)
		if err != nil {
			log.Error("start", "error", err.Error())
			gw.Close(context.Background())
			return 1
		}
		if err := serveHTTP(ctx, ln); err != nil {
			return fail("serve", err)
		}
		return 0
	}
	// Under --stdio the HTTP server, when configured, runs the policy
	// watcher (daemon.Serve runs gw.Run): its port is bound before stdio
	// is served, and stdio ends when it ends. A gateway that served stdio
	// without it would keep a tool the policy has since made irreversible
	// passing through.
	var ln net.Listener
	if cfg.Listen != "" {
		if ln, err = daemon.Listen(configPath, "listen", cfg.Listen); err != nil {
			log.Error("listen", "error", err.Error())
			gw.Close(context.Background())
			return 1
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	httpDone := make(chan error, 1)
	if ln != nil {
		go func() {
			defer cancel()
			httpDone <- serveHTTP(sctx, ln)
		}()
	} else {
		go func() { _ = gw.Run(sctx) }()
		daemon.OnSIGHUP(sctx, reload)
		close(httpDone)
	}
	err = gw.ServeStdio(sctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
	cancel()
	herr := <-httpDone
	if ln == nil {
		if cerr := gw.Close(context.Background()); cerr != nil {
			return fail("close", cerr)
		}
	}
	if herr != nil {
		return fail("serve http", herr)
	}
	if err != nil && sctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fail("serve stdio", err)
	}
	return 0
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
