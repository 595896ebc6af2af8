package httpx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/verdictgate/verdict/internal/loopback"
)

// ServeDebug serves the runtime profiles of net/http/pprof on ln, which the daemon bound for its
// debug_listen address, until ctx ends. It is never on by default: a daemon binds one only when
// its config names a debug_listen address. The address must be a loopback one, because profiles
// show memory contents (goroutine stacks, heap samples) and the listener has no authentication:
// the config refuses any other, and a listener on another address is refused here too.
func ServeDebug(ctx context.Context, ln net.Listener, log *slog.Logger) error {
	if err := CheckLoopback(ln.Addr().String()); err != nil {
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if log != nil {
		log.Warn("debug profiles served", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	}
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("debug_listen: %w", err)
	}
	return nil
}

// CheckLoopback refuses a listen address whose host is not a loopback IP or "localhost".
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("debug_listen %q: %w", addr, err)
	}
	if !loopback.Host(host) {
		return fmt.Errorf("debug_listen %q: only a loopback address is allowed", addr)
	}
	return nil
}
