package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
)

// stubServer serves nothing and runs until its context ends.
type stubServer struct{ running chan struct{} }

func (s stubServer) Handler() http.Handler { return http.NotFoundHandler() }
func (s stubServer) Run(ctx context.Context) error {
	close(s.running)
	<-ctx.Done()
	return nil
}
func (s stubServer) Close(context.Context) error { return nil }

// Serve serves the runtime profiles on ServeOptions.Debug while the service runs, and closes
// that listener when it returns.
func TestServeDebugListener(t *testing.T) {
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	ln, debug := listen(), listen()
	ctx, cancel := context.WithCancel(context.Background())
	svc := stubServer{running: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, svc, ServeOptions{Listener: ln, Debug: debug, Logger: slog.New(slog.DiscardHandler)})
	}()
	<-svc.running
	// The debug listener is bound before Serve starts, so a request waits in its backlog until
	// the profiles are served.
	resp, err := http.Get("http://" + debug.Addr().String() + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("/debug/pprof/cmdline: %d %q", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if c, err := net.Dial("tcp", debug.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the debug listener still accepts after Serve returned")
	}
}
