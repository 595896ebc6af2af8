package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/internal/daemon"
)

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("executor serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "config `file` (YAML)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *configPath == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: executor serve --config FILE")
		return 2
	}
	cfg, err := executor.LoadConfig(*configPath)
	if err != nil {
		fmt.Fprintln(stderr, "executor:", err)
		return 1
	}
	log := daemon.Logger(stderr, "executor")
	daemon.TuneGC(os.Getenv, log)
	ctx := context.Background()
	svc, err := executor.New(ctx, *cfg, executor.Options{Logger: log})
	if err != nil {
		log.Error("start", "error", err.Error())
		return 1
	}
	err = daemon.Serve(ctx, svc, daemon.ServeOptions{
		Listen:       cfg.Listen,
		TLS:          cfg.TLS,
		WriteTimeout: cfg.CallTimeout.Or(executor.DefaultCallTimeout) + executor.DefaultCallTimeout,
		Logger:       log,
	})
	if err != nil {
		log.Error("serve", "error", err.Error())
		return 1
	}
	return 0
}
