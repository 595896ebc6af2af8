package mcpgate_test

import (
	"os/exec"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/testing/conntest"
)

// ownBank is a bank the test may kill and start again on the same address.
type ownBank struct {
	addr, state, log string
	cmd              *exec.Cmd
}

func newOwnBank(t *testing.T) *ownBank {
	t.Helper()
	dir := t.TempDir()
	b := &ownBank{addr: freeAddr(), state: dir + "/bank.json", log: dir + "/bank-calls.jsonl"}
	b.start(t)
	return b
}

func (b *ownBank) url() string { return "http://" + b.addr + "/mcp" }

// start runs the bank on b's address and waits until it listens.
func (b *ownBank) start(t *testing.T) {
	t.Helper()
	cmd, _, err := runBank(b.addr, b.state, b.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	b.cmd = cmd
}

// kill ends the bank at once, as a crash does.
func (b *ownBank) kill() {
	b.cmd.Process.Kill()
	b.cmd.Wait()
}

// TestReadToAKilledServerSaysNothingWasDone: a pass-through read whose
// server was killed is never sent (the kept connection is closed, a new one
// refused), and the user is told that nothing was done — not that the
// action may have happened.
func TestReadToAKilledServerSaysNothingWasDone(t *testing.T) {
	s := bankStack(t)
	bank := newOwnBank(t)
	cfg := s.gatewayConfig(t.TempDir())
	cfg["servers"] = map[string]any{"bank": map[string]string{"url": bank.url()}}
	g := startGateway(t, cfg)
	sess := g.connect(t, userToken, nil)
	read := &mcp.CallToolParams{Name: "bank.get_balance", Arguments: map[string]any{"account": "1102534471"}}
	res, err := sess.CallTool(ctxT(t), read)
	if err != nil || res.IsError {
		t.Fatalf("a read with the bank up: %v %v", err, res)
	}
	bank.kill()
	// The gateway's kept connection is known closed by the bank first: a
	// call that took it before its close arrived could not tell whether the
	// bank read it. (The library gives the bank's event stream up only after
	// five reconnects, seconds away, so the call still finds the
	// connection current and dials.)
	conntest.WaitPeerClosed(t, bank.addr)
	res, err = sess.CallTool(ctxT(t), read)
	if err != nil {
		t.Fatal(err)
	}
	const want = "The service could not be reached, so nothing was sent to it. Nothing was done."
	if !res.IsError || reason(res) != "upstream_failed" || text(res) != want {
		t.Fatalf("a read to the killed bank: isError=%v reason %q: %q, want %q", res.IsError, reason(res), text(res), want)
	}
}
