package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/internal/httpx"
)

// readyWait bounds each answer a readiness check waits for: a probe must get an answer, not
// hang with a service that accepts connections and says nothing.
const readyWait = 5 * time.Second

// handleReady answers /readyz: 200 while verdictd's /readyz answers 200, the OpenID Provider
// serves its discovery document and the session store answers, without which no approver can
// sign in or decide; 503 with the problems otherwise. The executor is not asked: without it the audit view and the connected
// accounts page say so, and approvals go on.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	problems := s.notReady(r.Context())
	httpx.WriteReadiness(w, len(problems) == 0, problems, nil, nil)
}

// notReady says what keeps approvers from signing in and deciding. Anyone may ask, so a problem
// names the service and never quotes the provider's answer, which the log carries.
func (s *Server) notReady(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	problems := make([]string, 3)
	var wg sync.WaitGroup
	wg.Go(func() {
		err := s.records.Ready(ctx)
		if e, ok := errors.AsType[*client.Error](err); ok {
			problems[0] = fmt.Sprintf("verdictd is not ready (HTTP %d)", e.Status)
		} else if err != nil {
			problems[0] = fmt.Sprintf("verdictd is not reachable: %v", err)
		}
	})
	wg.Go(func() {
		if err := s.provider.Check(ctx); err != nil {
			s.log.Warn("readiness", "error", err.Error())
			problems[1] = fmt.Sprintf("the OpenID Provider %s does not serve its discovery document", s.cfg.OIDC.Issuer)
		}
	})
	wg.Go(func() {
		if err := s.sessions.store.ready(ctx); err != nil {
			s.log.Warn("readiness", "error", err.Error())
			problems[2] = "the session store does not answer"
		}
	})
	wg.Wait()
	return slices.DeleteFunc(problems, func(p string) bool { return p == "" })
}
