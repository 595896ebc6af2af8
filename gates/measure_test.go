package gates

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/measure"
	"github.com/verdictgate/verdict/upstream"
)

// The examples/bank MCP server is built and started once per test run, on first use, so that
// fuzzing and benchmarks that do not measure over MCP skip it.
var (
	bankCmd    = testbin.New("github.com/verdictgate/verdict/examples/bank")
	bankOnce   sync.Once
	bankDir    string
	bankClient *upstream.Client
	bankErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if bankClient != nil {
		bankClient.Close()
	}
	if bankDir != "" {
		os.RemoveAll(bankDir)
	}
	bankCmd.Remove()
	os.Exit(code)
}

// bank returns a client of a real bank server process over stdio, with its demo ledger
// (account 1102534471 holds 2,000,000). Measurements only read it.
func bank(t testing.TB) *upstream.Client {
	t.Helper()
	bin := bankCmd.Path(t) // outside Do: a failed build fails t, not the Once
	bankOnce.Do(func() {
		if bankDir, bankErr = os.MkdirTemp("", "gates-test-"); bankErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		bankClient, bankErr = upstream.Dial(ctx, "bank",
			upstream.Config{Command: []string{bin, "--state", filepath.Join(bankDir, "state.json")}}, upstream.Options{})
	})
	if bankErr != nil {
		t.Fatal(bankErr)
	}
	return bankClient
}

// measureEnv is a real local HTTP measurement endpoint whose answers a test sets.
type measureEnv struct {
	http    *httptest.Server
	downURL string
	hits    atomic.Int64

	mu       sync.Mutex
	balances map[string]json.RawMessage
	limits   map[string]json.RawMessage
}

func newMeasureEnv(t testing.TB) *measureEnv {
	env := &measureEnv{balances: map[string]json.RawMessage{}, limits: map[string]json.RawMessage{}}
	lookup := func(table map[string]json.RawMessage, member string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			env.hits.Add(1)
			acct := r.URL.Query().Get("account")
			env.mu.Lock()
			v, ok := table[acct]
			env.mu.Unlock()
			if !ok {
				http.Error(w, `{"error":"no such account"}`, http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			a, _ := json.Marshal(acct)
			fmt.Fprintf(w, `{"account":%s,%q:%s}`, a, member, v)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/balance", lookup(env.balances, "balance"))
	mux.HandleFunc("/limit", lookup(env.limits, "limit"))
	mux.HandleFunc("/rate", func(w http.ResponseWriter, r *http.Request) {
		env.hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"rate":{"currency":"KRW","fee_account":"FEE-01"}}`)
	})
	mux.HandleFunc("/fee", func(w http.ResponseWriter, r *http.Request) {
		env.hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("account") {
		case "FEE-01":
			fmt.Fprint(w, `{"fee":500}`)
		default:
			fmt.Fprint(w, `{"fee":null}`)
		}
	})
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
		env.hits.Add(1)
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	})
	env.http = httptest.NewServer(mux)
	t.Cleanup(env.http.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	env.downURL = down.URL
	down.Close()
	return env
}

// set replaces the answers for the accounts given.
func (env *measureEnv) set(balances, limits map[string]json.RawMessage) {
	env.mu.Lock()
	defer env.mu.Unlock()
	for k, v := range balances {
		env.balances[k] = v
	}
	for k, v := range limits {
		env.limits[k] = v
	}
}

// measurer measures over HTTP against env and over MCP against the bank process, started
// only when a measurement needs it.
func (env *measureEnv) measurer(t testing.TB) *measure.Measurer {
	return measure.New(measure.Options{
		HTTPClient:     env.http.Client(),
		DefaultTimeout: 20 * time.Second,
		MCP: func(_ context.Context, server string) (*upstream.Client, error) {
			if server != "bank" {
				return nil, fmt.Errorf("server %q is not configured", server)
			}
			return bank(t), nil
		},
	})
}
