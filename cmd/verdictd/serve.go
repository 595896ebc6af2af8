package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
	svc, err := verdictd.New(ctx, *cfg, verdictd.Options{Logger: log, Getenv: os.Getenv})
	if err != nil {
		log.Error("start", "error", err.Error())
		return 1
	}
	ln, err := daemon.Listen(configPath, "listen", cfg.Listen)
	if err != nil {
		log.Error("start", "error", err.Error())
		svc.Close(ctx)
		return 1
	}
	err = daemon.Serve(ctx, svc, daemon.ServeOptions{
		Listener:     ln,
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
