package verdictd

import (
	"testing"

	"github.com/verdictgate/verdict/internal/testing/apitest"
)

// TestRefusalsAreTheDescribedEnvelope checks verdictd's refusals that come before any handler
// against api/openapi.yaml: 401 on every operation that takes a token, 404 not_found for any
// other method or path, each in the error envelope.
func TestRefusalsAreTheDescribedEnvelope(t *testing.T) {
	e := newEnv(t, envOpts{})
	apitest.Load(t).CheckRefusals(t, "verdictd", e.srv.URL)
}
