package executor

import (
	"testing"

	"github.com/verdictgate/verdict/internal/testing/apitest"
)

// TestRefusalsAreTheDescribedEnvelope checks the executor's refusals that come before any
// handler against api/openapi.yaml: 401 on every operation that takes a token, 404 not_found for
// any other method or path, each in the error envelope, not net/http's plain text.
func TestRefusalsAreTheDescribedEnvelope(t *testing.T) {
	e := newEnv(t, envOpts{})
	apitest.Load(t).CheckRefusals(t, "executor", e.srv.URL)
}
