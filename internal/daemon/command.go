package daemon

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
)

// A Command is the serve subcommand of a daemon whose config is a C: serve --config FILE. It
// holds what the daemons differ in; Run does the rest the same way for each.
type Command[C any] struct {
	Name string // the program: the flag set's and the log records' name, the prefix of a config error
	Load func(path string) (*C, error)
	// Addrs are the config's listen and debug_listen ("" when not set).
	Addrs func(*C) (listen, debug string)
	// TuneGC applies DefaultGCPercent (TuneGC), for a daemon on the calls' path.
	TuneGC bool
	// Start makes the service once the logger and the trust roots are in place, and says how it
	// is served: Run sets the listeners and the logger of the options.
	Start func(ctx context.Context, cfg *C, log *slog.Logger) (Server, ServeOptions, error)
}

// Run is the serve subcommand: it reads --config, loads the config (a problem is written to
// stderr with its file and line), trusts the extra CA bundle, binds debug_listen, makes the
// service, binds listen, and serves until a signal. Both addresses are bound before anything is
// served, so that one that cannot be bound stops the start at its config key. The exit code is
// 0 after a clean shutdown, 1 when the start or the serving failed (logged), 2 on a usage error.
func (c Command[C]) Run(args []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet(c.Name+" serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path, code, ok := ConfigFlag(fs, args, c.Name+" serve --config FILE")
	if !ok {
		return code
	}
	cfg, err := c.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, c.Name+":", err)
		return 1
	}
	log := Logger(stderr, c.Name)
	if c.TuneGC {
		TuneGC(os.Getenv, log)
	}
	if stage, err := c.serve(path, cfg, log); err != nil {
		log.Error(stage, "error", err.Error())
		return 1
	}
	return 0
}

// serve starts and serves the service; stage says which failed: start or serve.
func (c Command[C]) serve(path string, cfg *C, log *slog.Logger) (stage string, err error) {
	if err := TrustRoots(os.Getenv, log); err != nil {
		return "start", err
	}
	listen, debug := c.Addrs(cfg)
	var debugLn net.Listener
	if debug != "" {
		if debugLn, err = Listen(path, "debug_listen", debug); err != nil {
			return "start", err
		}
	}
	ctx := context.Background()
	svc, opts, err := c.Start(ctx, cfg, log)
	if err == nil {
		if opts.Listener, err = Listen(path, "listen", listen); err != nil {
			svc.Close(ctx)
		}
	}
	if err != nil {
		if debugLn != nil {
			debugLn.Close()
		}
		return "start", err
	}
	opts.Debug, opts.Logger = debugLn, log
	return "serve", Serve(ctx, svc, opts)
}
