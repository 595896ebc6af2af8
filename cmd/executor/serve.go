package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/internal/daemon"
)

func serve(args []string, stdout, stderr io.Writer) int {
	return daemon.Command[executor.Config]{
		Name:   "executor",
		Load:   executor.LoadConfig,
		Addrs:  func(c *executor.Config) (string, string) { return c.Listen, c.DebugListen },
		TuneGC: true,
		Start: func(ctx context.Context, cfg *executor.Config, log *slog.Logger) (daemon.Server, daemon.ServeOptions, error) {
			svc, err := executor.New(ctx, *cfg, executor.Options{Logger: log, Getenv: os.Getenv})
			if err != nil {
				return nil, daemon.ServeOptions{}, err
			}
			return svc, daemon.ServeOptions{
				TLS:          cfg.TLS,
				WriteTimeout: cfg.CallTimeout.Or(executor.DefaultCallTimeout) + executor.DefaultCallTimeout,
			}, nil
		},
	}.Run(args, stdout, stderr)
}
