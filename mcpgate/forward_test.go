package mcpgate

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/verdictgate/verdict/identity"
)

// TestForwardSubjectOnlyToVerdictd: the host's token goes to verdictd's origin with the
// requests made while serving its call, and nowhere else: not to another origin (a redirect
// target), not with a request made outside a call.
func TestForwardSubjectOnlyToVerdictd(t *testing.T) {
	seen := make(chan string, 1)
	srv := func() *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen <- r.Header.Get(identity.SubjectTokenHeader)
		}))
	}
	verdictd, other := srv(), srv()
	defer verdictd.Close()
	defer other.Close()
	c, err := forwardingClient(&http.Client{}, "verdictd", verdictd.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	call := context.WithValue(t.Context(), subjectTokenKey{}, "the-host-token")
	for _, tc := range []struct {
		name string
		ctx  context.Context
		url  string
		want string
	}{
		{"verdictd, in a call", call, verdictd.URL + "/v1/preflight", "the-host-token"},
		{"another origin, in a call", call, other.URL + "/v1/preflight", ""},
		{"verdictd, outside a call", t.Context(), verdictd.URL + "/v1/preflight", ""},
	} {
		req, err := http.NewRequestWithContext(tc.ctx, http.MethodPost, tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := <-seen; got != tc.want {
			t.Errorf("%s: %s %q, want %q", tc.name, identity.SubjectTokenHeader, got, tc.want)
		}
	}
}
