// Package daemon owns what the daemons do the same way around their service: the JSON logger,
// the HTTP server with its timeouts and TLS, signal handling and graceful shutdown, watching a
// policy file for a new content, and the serve subcommand that puts them together (Command).
package daemon

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/verdictgate/verdict/internal/cli"
	"github.com/verdictgate/verdict/internal/httpx"
)

// Logger returns the JSON logger the daemons write to stderr. Services log ids, codes and
// counts, never argument values, tokens or keys. A duration is written as Go writes one
// ("1.5s", "10m0s"), not as the integer nanoseconds slog's JSON handler writes.
func Logger(w io.Writer, name string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: durationString}
	return slog.New(slog.NewJSONHandler(w, opts)).With("service", name)
}

// durationString writes a duration attribute as its String.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// Server is what Serve needs of a service.
type Server interface {
	Handler() http.Handler
	Run(ctx context.Context) error
	Close(ctx context.Context) error
}

// ServeOptions configure Serve.
type ServeOptions struct {
	Listen       string
	TLS          *httpx.TLS
	WriteTimeout time.Duration // must exceed the longest request (a tool call)
	ShutdownWait time.Duration // zero means 30s
	Logger       *slog.Logger
	// OnSIGHUP, if set, is called on SIGHUP (policy reload).
	OnSIGHUP func()
	// OnShutdown, if set, is called when shutdown begins, to end what
	// outlives a request (long-lived event streams) so that in-flight
	// requests are all that shutdown waits for.
	OnShutdown func()
	// Listener, if set, is served instead of listening on Listen: a
	// caller that must know the address is bound before it goes on binds
	// it first.
	Listener net.Listener
	// Debug, if set, serves the Go runtime profiles (debug_listen) while svc runs; it is
	// closed when Serve returns. The caller binds it with Listen before anything starts, so
	// that an address that cannot be bound stops the start at its config key.
	Debug net.Listener
}

// Serve runs svc on opts.Listen until SIGINT or SIGTERM (or ctx ends), then stops accepting,
// lets in-flight requests finish within ShutdownWait and closes svc.
func Serve(ctx context.Context, svc Server, opts ServeOptions) error {
	log := opts.Logger
	tlsCfg, err := opts.TLS.Config()
	if err != nil {
		return err
	}
	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", opts.Listen); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	srv := &http.Server{
		Handler:           svc.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		TLSConfig:         tlsCfg,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if opts.OnShutdown != nil {
		srv.RegisterOnShutdown(opts.OnShutdown)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	runCtx, cancelRun := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = svc.Run(runCtx) }()
	if opts.Debug != nil {
		debugDone := make(chan struct{})
		defer func() { <-debugDone }()
		go func() {
			defer close(debugDone)
			if err := httpx.ServeDebug(runCtx, opts.Debug, log); err != nil {
				log.Error("debug listener", "error", err.Error())
			}
		}()
	}

	if opts.OnSIGHUP != nil {
		OnSIGHUP(ctx, opts.OnSIGHUP)
	}

	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	log.Info("listening", "addr", scheme+"://"+ln.Addr().String())
	serveErr := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			serveErr <- srv.ServeTLS(ln, "", "")
			return
		}
		serveErr <- srv.Serve(ln)
	}()

	select {
	case err = <-serveErr:
	case <-ctx.Done():
		log.Info("shutting down")
	}
	sctx, cancel := context.WithTimeout(context.Background(), cmp.Or(opts.ShutdownWait, 30*time.Second))
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn("http shutdown", "error", serr)
	}
	cancelRun()
	<-runDone
	cerr := svc.Close(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, cerr)
}

// OnSIGHUP calls fn on every SIGHUP (a policy reload) until ctx ends. The signal is caught from
// its return on: it no longer ends the process, as its default action would.
func OnSIGHUP(ctx context.Context, fn func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				fn()
			}
		}
	}()
}

// ConfigFlag parses a serve command's arguments: fs's own flags plus the required --config FILE,
// and nothing positional. When ok is false the command ends at once with code: 0 after -h, 2 on
// a usage error (the usage line is written to fs's output).
func ConfigFlag(fs *flag.FlagSet, args []string, usage string) (path string, code int, ok bool) {
	config := fs.String("config", "", "config `file` (YAML)")
	if code, ok := cli.Parse(fs, args, 2); !ok {
		return "", code, false
	}
	if *config == "" || fs.NArg() > 0 {
		fmt.Fprintln(fs.Output(), "usage:", usage)
		return "", 2, false
	}
	return *config, 0, true
}
