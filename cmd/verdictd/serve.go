package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/verdictgate/verdict/internal/daemon"
	"github.com/verdictgate/verdict/verdictd"
)

func serve(args []string, stdout, stderr io.Writer) int {
	return daemon.Command[verdictd.Config]{
		Name:   "verdictd",
		Load:   verdictd.LoadConfig,
		Addrs:  func(c *verdictd.Config) (string, string) { return c.Listen, c.DebugListen },
		TuneGC: true,
		Start: func(ctx context.Context, cfg *verdictd.Config, log *slog.Logger) (daemon.Server, daemon.ServeOptions, error) {
			svc, err := verdictd.New(ctx, *cfg, verdictd.Options{Logger: log, Getenv: os.Getenv})
			if err != nil {
				return nil, daemon.ServeOptions{}, err
			}
			return svc, daemon.ServeOptions{
				TLS:          cfg.TLS,
				WriteTimeout: verdictd.WriteTimeout, // a preflight is bounded by preflight_timeout, shorter
				OnShutdown:   svc.EndWaits,
				OnSIGHUP:     func() { _ = svc.Reload(ctx) },
			}, nil
		},
	}.Run(args, stdout, stderr)
}
