package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/verdictgate/verdict/internal/daemon"
	"github.com/verdictgate/verdict/verdictd"
)

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("verdictd serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath, code, ok := daemon.ConfigFlag(fs, args, "verdictd serve --config FILE")
	if !ok {
		return code
	}
	cfg, err := verdictd.LoadConfig(configPath)
	if err != nil {
		fmt.Fprintln(stderr, "verdictd:", err)
		return 1
	}
	log := daemon.Logger(stderr, "verdictd")
	daemon.TuneGC(os.Getenv, log)
	if err := daemon.TrustRoots(os.Getenv, log); err != nil {
		log.Error("start", "error", err.Error())
		return 1
	}
	ctx := context.Background()
	// debug_listen is bound here, before the service starts, so that an address that cannot be
	// bound stops the start at its config key and line, as listen does.
	var debugLn net.Listener
	if cfg.DebugListen != "" {
		if debugLn, err = daemon.Listen(configPath, "debug_listen", cfg.DebugListen); err != nil {
			log.Error("start", "error", err.Error())
			return 1
		}
	}
	svc, err := verdictd.New(ctx, *cfg, verdictd.Options{Logger: log, Getenv: os.Getenv})
	if err != nil {
		log.Error("start", "error", err.Error())
		if debugLn != nil {
			debugLn.Close()
		}
		return 1
	}
	ln, err := daemon.Listen(configPath, "listen", cfg.Listen)
	if err != nil {
		log.Error("start", "error", err.Error())
		svc.Close(ctx)
		if debugLn != nil {
			debugLn.Close()
		}
		return 1
	}
	err = daemon.Serve(ctx, svc, daemon.ServeOptions{
		Listener:     ln,
		Debug:        debugLn,
		TLS:          cfg.TLS,
		WriteTimeout: verdictd.WriteTimeout, // a preflight is bounded by preflight_timeout, shorter
		Logger:       log,
		OnShutdown:   svc.EndWaits,
		OnSIGHUP:     func() { _ = svc.Reload(ctx) },
	})
	if err != nil {
		log.Error("serve", "error", err.Error())
		return 1
	}
	return 0
}
