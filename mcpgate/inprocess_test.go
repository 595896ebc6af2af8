package mcpgate_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/verdictgate/verdict/mcpgate"
)

// runGateway runs the gateway of config raw in the test process, its config file and
// log in dir, until the test ends; its log is printed when the test fails. Servers the caller
// starts on its handlers after this are closed first (cleanups run last-registered first).
func runGateway(t testing.TB, dir string, raw map[string]any) (gw *mcpgate.Gateway, logPath string) {
	t.Helper()
	cfgPath := filepath.Join(dir, "mcpgate.yaml")
	if err := writeJSON(cfgPath, raw); err != nil {
		t.Fatal(err)
	}
	cfg, err := mcpgate.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	logPath = filepath.Join(dir, "mcpgate.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gw, err = mcpgate.New(ctx, *cfg, mcpgate.Options{Logger: slog.New(slog.NewJSONHandler(logf, nil))})
	if err != nil {
		cancel()
		logf.Close()
		t.Fatal(err)
	}
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = gw.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-runDone
		gw.Close(context.Background())
		logf.Close()
		if t.Failed() {
			t.Logf("mcpgate log:\n%s", readFile(logPath))
		}
	})
	return gw, logPath
}
