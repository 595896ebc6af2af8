package executor

import (
	"path/filepath"
	"testing"

	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/verdict"
)

// A nonce store kept in the executor's own file guards that executor alone: a verdict that
// names a second executor could run once on each. Such an executor runs only verdicts that name
// it alone.
func TestLocalNonceStoreRunsOnlySoleAudienceVerdicts(t *testing.T) {
	a := newEnv(t, envOpts{})
	// A second executor with its own bbolt file and its own bank, trusting the same issuer.
	b := &env{t: t, dir: t.TempDir(), issuer: a.issuer, now: a.now}
	b.bankLog = filepath.Join(b.dir, "bank.log")
	cfg := a.svc.cfg
	cfg.ExecutorID = "executor-bank-2"
	cfg.DataDir = filepath.Join(b.dir, "data")
	cfg.Servers = map[string]upstream.Config{"bank": {Command: []string{bankCmd.Path(t), "--state", filepath.Join(b.dir, "bank.json"), "--log", b.bankLog}}}
	b.svc = b.open(cfg)

	args := `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`
	tests := []struct {
		name   string
		aud    []string
		status int // on each executor named, a then b
		reason string
	}{
		{"both executors", []string{execID, "executor-bank-2"}, 403, string(verdict.AudienceMismatch)},
		{"this one and an unknown one", []string{"executor-bank-2", "executor-elsewhere"}, 403, string(verdict.AudienceMismatch)},
		{"this one twice", []string{execID, execID}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := a.claims(transferArgs)
			c.Audience = tt.aud
			tok := a.sign(c)
			for _, e := range []*env{a, b} {
				named := false
				for _, id := range tt.aud {
					named = named || id == e.svc.cfg.ExecutorID
				}
				if !named {
					continue
				}
				r := e.execute(tok, args)
				if r.Status != tt.status || r.Error.Code != tt.reason {
					t.Errorf("%s: got %d %q, want %d %q", e.svc.cfg.ExecutorID, r.Status, r.Error.Code, tt.status, tt.reason)
				}
			}
		})
	}
	if got := len(a.arrivals("transfer")) + len(b.arrivals("transfer")); got != 1 {
		t.Fatalf("the banks saw %d transfers, want 1", got)
	}
}
