package executor

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// BenchmarkExecute measures one execution in-process: HTTP handler, canonicalization,
// verification, nonce + started record in one group commit, a call to the bank's get_balance
// over stdio, the finish record and the receipt.
func BenchmarkExecute(b *testing.B) {
	t := &testing.T{}
	e := newEnv(t, envOpts{})
	defer func() {
		e.srv.Close()
		e.svc.Close(b.Context())
	}()
	args := map[string]any{"account": "1102534471"}
	tool, _ := e.svc.catalog.Lookup("bank", "get_balance")
	bodies := make([]string, b.N)
	for i := range bodies {
		c := e.claims(args)
		c.Tool, c.ToolDigest = "get_balance", tool.Digest
		bodies[i] = fmt.Sprintf(`{"verdict":%q,"arguments":{"account":"1102534471"}}`, e.sign(c))
	}
	h := e.svc.Handler()
	var next atomic.Int64
	b.SetParallelism(16)
	before := e.svc.db.Stats()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			req := httptest.NewRequest("POST", "/v1/execute", strings.NewReader(bodies[i]))
			req.Header.Set("Authorization", "Bearer "+callerToken)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Errorf("status %d: %s", w.Code, w.Body)
			}
		}
	})
	// Pages written do not depend on the machine's noise, unlike the rate: the started record
	// with its nonce and the finished record, in the commits the executions shared.
	if st := e.svc.db.Stats(); st.Commits > before.Commits {
		b.ReportMetric(float64(st.Pages-before.Pages)/float64(b.N), "pages/op")
		b.ReportMetric(float64(st.Pages-before.Pages)/float64(st.Commits-before.Commits), "pages/commit")
	}
}
