package upstream

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/testbin"
)

// bankCmd is the examples/bank server, built on first use so that fuzzing and benchmarks that do
// not need it skip the build.
var bankCmd = testbin.New("github.com/verdictgate/verdict/examples/bank")

func TestMain(m *testing.M) {
	switch os.Getenv(helperServerEnv) {
	case "":
	case dynamicServerMode:
		// The test binary re-executed as a stdio MCP server whose tools
		// change at runtime.
		os.Exit(runDynamicServer())
	case resourceServerMode:
		// The test binary re-executed as a stdio MCP server with
		// resources, templates and prompts.
		os.Exit(runResServer())
	case meterServerMode:
		// The test binary re-executed as a stdio MCP server answering
		// number literals verbatim.
		os.Exit(runMeterServer())
	default:
		// The test binary re-executed as a stdio MCP server.
		os.Exit(runHelperServer())
	}
	code := m.Run()
	bankCmd.Remove()
	os.Exit(code)
}

func bankBinary(t testing.TB) string { return bankCmd.Path(t) }

// bank describes one bank server for a test: its files and how to reach it.
type bank struct {
	state, log string
	cfg        Config
	cmd        *exec.Cmd // HTTP servers only
}

// testOptions keep reconnects quick and the log, with the children's
// stderr, in the test output.
func testOptions(t testing.TB) Options {
	return Options{Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		RestartDelay: 10 * time.Millisecond, MaxRestartDelay: 200 * time.Millisecond}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newBankFiles(t testing.TB) *bank {
	dir := t.TempDir()
	return &bank{state: filepath.Join(dir, "state.json"), log: filepath.Join(dir, "calls.jsonl")}
}

// stdioBank returns the config of a bank child spoken to over stdio.
func stdioBank(t testing.TB, flags ...string) *bank {
	b := newBankFiles(t)
	b.cfg = Config{Command: append([]string{bankBinary(t), "--state", b.state, "--log", b.log}, flags...)}
	return b
}

// httpBank starts a bank serving streamable HTTP on a free loopback port.
func httpBank(t testing.TB, flags ...string) *bank {
	b := newBankFiles(t)
	b.start(t, "127.0.0.1:0", flags...)
	return b
}

// start (re)starts b's HTTP server on addr, sharing b's state and log.
func (b *bank) start(t testing.TB, addr string, flags ...string) {
	t.Helper()
	cmd := exec.Command(bankBinary(t), append([]string{"--state", b.state, "--log", b.log, "--http", addr}, flags...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "bank: listening on "); ok {
			b.cfg = Config{URL: u}
			b.cmd = cmd
			go func() {
				for sc.Scan() {
					t.Log(sc.Text())
				}
			}()
			return
		}
		t.Log(sc.Text())
	}
	t.Fatalf("bank did not start: %v", cmd.Wait())
}

// stop kills b's HTTP server and waits for it to exit.
func (b *bank) stop() {
	b.cmd.Process.Kill()
	b.cmd.Wait()
}

type logEntry struct {
	PID             int    `json:"pid"`
	Tool            string `json:"tool"`
	ArgumentsBase64 string `json:"arguments_base64"`
}

// calls reads the bank's call log.
func (b *bank) calls(t *testing.T) []logEntry {
	t.Helper()
	data, err := os.ReadFile(b.log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []logEntry
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var e logEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("call log line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

func (b *bank) callsTo(t *testing.T, tool string) []logEntry {
	var out []logEntry
	for _, e := range b.calls(t) {
		if e.Tool == tool {
			out = append(out, e)
		}
	}
	return out
}

// waitForCall polls the call log until tool has arrived n times.
func (b *bank) waitForCall(t *testing.T, tool string, n int) logEntry {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if got := b.callsTo(t, tool); len(got) >= n {
			return got[n-1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not arrive %d times", tool, n)
	return logEntry{}
}

func (e logEntry) args(t *testing.T) string {
	b, err := base64.StdEncoding.DecodeString(e.ArgumentsBase64)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func dial(t testing.TB, b *bank) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, "bank", b.cfg, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// transports runs f once against a stdio bank and once against an HTTP
// bank, each started with flags.
func transports(t *testing.T, flags []string, f func(t *testing.T, b *bank)) {
	for _, tr := range []struct {
		name  string
		start func(testing.TB, ...string) *bank
	}{{"stdio", stdioBank}, {"http", httpBank}} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			f(t, tr.start(t, flags...))
		})
	}
}
