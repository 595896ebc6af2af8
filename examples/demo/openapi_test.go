package main

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/testing/apitest"
)

// spec is api/openapi.yaml, loaded for validating real answers.
type spec struct {
	*apitest.Spec
	seen map[string]bool // "METHOD path" of every operation an answer was validated for
}

func loadSpec(t *testing.T) *spec {
	t.Helper()
	return &spec{Spec: apitest.Load(t), seen: map[string]bool{}}
}

// checkRequest validates a request body the test sends as valid against the description of
// method on path, so that the described requests are the ones the daemons take.
func (s *spec) checkRequest(t *testing.T, method, path, mediaType string, body []byte) {
	t.Helper()
	if !s.Described(method, path) {
		t.Errorf("%s %s is not described", method, path)
		return
	}
	sch, err := s.RequestSchema(method, path, mediaType)
	if err != nil {
		t.Errorf("%s %s: no request body of type %s described: %v", method, path, mediaType, err)
		return
	}
	v := any(string(body))
	if mediaType == "application/json" {
		if v, err = jsonschema.UnmarshalJSON(bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s %s: a request the daemon takes does not match the description: %v", method, path, err)
	}
}

// check validates a real answer against the description: its status, media type and body (each
// line of a JSON Lines body).
func (s *spec) check(t *testing.T, method, path string, resp *http.Response, body []byte) {
	t.Helper()
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		t.Errorf("%s %s: Content-Type %q: %v", method, path, resp.Header.Get("Content-Type"), err)
		return
	}
	sch, err := s.ResponseSchema(method, path, resp.StatusCode, mt)
	if err != nil {
		t.Errorf("%v (body %.300s)", err, body)
		return
	}
	s.seen[method+" "+path] = true
	var docs [][]byte
	switch mt {
	case "application/json", "application/jwk-set+json":
		docs = [][]byte{body}
	case "application/x-ndjson":
		for line := range bytes.Lines(body) {
			if len(bytes.TrimSpace(line)) > 0 {
				docs = append(docs, line)
			}
		}
		if err := api.CheckExportTrailer(resp.Trailer, len(docs)); err != nil {
			t.Errorf("%s %s: %v", method, path, err)
		}
	default:
		return // text: nothing more to check than that it is described
	}
	for i, d := range docs {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(d))
		if err != nil {
			t.Errorf("%s %s %d: document %d is not JSON: %v", method, path, resp.StatusCode, i, err)
			continue
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s %s %d: the answer does not match the description: %v\n%.600s", method, path, resp.StatusCode, err, d)
		}
	}
}

// servedRoutes reads the routes a Handler registers from its source: "METHOD /path" patterns
// of net/http's ServeMux.
func servedRoutes(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	_, handler, ok := bytes.Cut(b, []byte(") Handler() http.Handler {"))
	if !ok {
		t.Fatalf("%s: no Handler method", file)
	}
	handler, _, _ = bytes.Cut(handler, []byte("\n}\n"))
	var routes []string
	for _, m := range regexp.MustCompile(`mux\.Handle(?:Func)?\("([^"]+)"`).FindAllSubmatch(handler, -1) {
		if p := string(m[1]); p != "/" { // the catch-all 404
			routes = append(routes, p)
		}
	}
	if len(routes) == 0 {
		t.Fatalf("%s: found no routes in Handler", file)
	}
	return routes
}

// TestOpenAPIDescribesTheDaemons runs verdictd and the executor and validates a real answer of
// every endpoint against api/openapi.yaml: each route a Handler serves must be described, each
// answer's status, media type and members too.
func TestOpenAPIDescribesTheDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the whole stack")
	}
	s := loadSpec(t)
	var routes []string
	for _, f := range []string{"verdictd/service.go", "executor/service.go"} {
		for _, r := range servedRoutes(t, f) {
			method, path, ok := strings.Cut(r, " ")
			if !ok {
				t.Errorf("%s: route %q has no method: every route is described per method", f, r)
				continue
			}
			if !s.Described(method, path) {
				t.Errorf("%s serves %s %s, which api/openapi.yaml does not describe", f, method, path)
			}
			routes = append(routes, method+" "+path)
		}
	}

	d, err := newDemo(false)
	if err != nil {
		t.Fatal(err)
	}
	startTestStack(t, d)
	do := func(method, base, path, target, token, contentType string, body []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequest(method, base+target, rd)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		s.check(t, method, path, resp, out)
		if resp.StatusCode == http.StatusOK && body != nil {
			s.checkRequest(t, method, path, contentType, body)
		}
	}
	js := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// A first preflight asks; settling it issues a verdict; executing it gives a receipt.
	req, _ := transferRequest("c_openapi")
	req["new_request"] = true
	do("POST", d.verdictd, "/v1/preflight", "/v1/preflight", agentToken, "application/json", js(req))
	rec, err := d.settle(req)
	if err != nil {
		t.Fatal(err)
	}
	do("POST", d.verdictd, "/v1/preflight", "/v1/preflight", agentToken, "application/json", js(req)) // the same answers again
	do("POST", d.verdictd, "/v1/preflight", "/v1/preflight", "", "application/json", js(req))
	do("POST", d.verdictd, "/v1/preflight", "/v1/preflight", agentToken, "application/json", []byte(`{"principal":"u_01","bogus":1}`))
	do("POST", d.verdictd, "/v1/preflight", "/v1/preflight", agentToken, "application/json", bytes.Repeat([]byte(" "), 4<<20))
	do("POST", d.verdictd, "/v1/preflight", "/v1/preflight", agentToken, "text/plain", js(req))

	token, _ := rec["verdict"].(string)
	verdictID, _ := rec["verdict_id"].(string)
	args := rec["call_arguments"]
	status, out, err := d.present(token, args)
	if err != nil || status != 200 {
		t.Fatalf("execute: %d %v %v", status, out, err)
	}
	receipt, _ := out["receipt"].(string)
	execRecord, _ := out["execution"].(map[string]any)["record_id"].(string)
	executeBody := js(map[string]any{"verdict": token, "arguments": args})
	// The body the executor ran is a described request.
	s.checkRequest(t, "POST", "/v1/execute", "application/json", executeBody)
	do("POST", d.executor, "/v1/execute", "/v1/execute", agentToken, "application/json", executeBody) // replayed
	do("POST", d.executor, "/v1/execute", "/v1/execute", agentToken, "application/json",
		js(map[string]any{"verdict": token, "arguments": map[string]any{"amount": 1}})) // arguments_mismatch
	do("POST", d.executor, "/v1/execute", "/v1/execute", "", "application/json", executeBody)
	do("POST", d.executor, "/v1/execute", "/v1/execute", agentToken, "application/json", []byte(`{"verdict":1}`))

	do("POST", d.verdictd, "/v1/receipts", "/v1/receipts", agentToken, "application/jose", []byte(receipt))
	do("POST", d.verdictd, "/v1/receipts", "/v1/receipts", agentToken, "application/json", js(map[string]string{"receipt": receipt}))
	do("POST", d.verdictd, "/v1/receipts", "/v1/receipts", agentToken, "application/json", []byte(`{}`))
	do("POST", d.verdictd, "/v1/receipts", "/v1/receipts", "", "application/jose", []byte(receipt))
	do("POST", d.verdictd, "/v1/receipts/batch", "/v1/receipts/batch", agentToken, "application/json",
		js(map[string]any{"receipts": []string{receipt, receipt[:len(receipt)-4] + "AAAA"}}))
	do("POST", d.verdictd, "/v1/receipts/batch", "/v1/receipts/batch", agentToken, "application/json", []byte(`{"receipts":[]}`))
	do("POST", d.verdictd, "/v1/receipts/batch", "/v1/receipts/batch", "", "application/json", js(map[string]any{"receipts": []string{receipt}}))

	recordID, _ := rec["record_id"].(string)
	for _, mask := range []string{"", "?mask=1"} {
		do("GET", d.verdictd, "/v1/records/{id}", "/v1/records/"+recordID+mask, adminToken, "", nil)
		do("GET", d.verdictd, "/v1/records", "/v1/records"+mask, adminToken, "", nil)
		do("GET", d.executor, "/v1/executions", "/v1/executions"+mask, adminToken, "", nil)
	}
	do("GET", d.executor, "/v1/executions/{id}", "/v1/executions/"+execRecord, adminToken, "", nil)
	do("GET", d.verdictd, "/v1/records", "/v1/records?verdict_id="+verdictID, adminToken, "", nil)
	do("GET", d.verdictd, "/v1/records/{id}", "/v1/records/rec_none", adminToken, "", nil)
	do("GET", d.verdictd, "/v1/records/{id}", "/v1/records/"+recordID, agentToken, "", nil)
	do("GET", d.verdictd, "/v1/records", "/v1/records?since=yesterday", adminToken, "", nil)
	do("GET", d.executor, "/v1/executions/{id}", "/v1/executions/exe_none", adminToken, "", nil)
	do("GET", d.executor, "/v1/executions", "/v1/executions?since=yesterday", adminToken, "", nil)
	do("GET", d.executor, "/v1/executions", "/v1/executions", "", "", nil)
	do("GET", d.executor, "/v1/catalog", "/v1/catalog", adminToken, "", nil)
	do("GET", d.executor, "/v1/catalog", "/v1/catalog", "", "", nil)
	do("GET", d.verdictd, "/.well-known/jwks.json", "/.well-known/jwks.json", "", "", nil)
	// The demo's servers are all shared: a read is the gateway's own (409), and there are no
	// grants or connections to speak of (404); each without its token is 401.
	readBody := js(map[string]any{"server": "bank", "tool": "get_balance", "arguments": map[string]any{}})
	s.checkRequest(t, "POST", "/v1/read", "application/json", readBody)
	do("POST", d.executor, "/v1/read", "/v1/read", agentToken, "application/json", readBody)
	do("POST", d.executor, "/v1/read", "/v1/read", "", "application/json", readBody)
	do("GET", d.executor, "/v1/grants", "/v1/grants?principal=u_01", adminToken, "", nil)
	do("GET", d.executor, "/v1/grants", "/v1/grants?principal=u_01", "", "", nil)
	do("DELETE", d.executor, "/v1/grants/{server}", "/v1/grants/bank?principal=u_01", adminToken, "", nil)
	do("GET", d.executor, "/v1/connections/{server}", "/v1/connections/bank?wait=1s", agentToken, "", nil)
	do("GET", d.executor, "/v1/connections/{server}", "/v1/connections/bank", "", "", nil)
	// The demo's policy takes no approval in the console: the list is empty, and a decision
	// needs an approver token, which a caller token is not.
	do("GET", d.verdictd, "/v1/approvals", "/v1/approvals?state=pending", agentToken, "", nil)
	do("GET", d.verdictd, "/v1/approvals", "/v1/approvals?state=bogus", agentToken, "", nil)
	do("GET", d.verdictd, "/v1/approvals", "/v1/approvals", "", "", nil)
	do("GET", d.verdictd, "/v1/approvals/{id}", "/v1/approvals/apr_none", agentToken, "", nil)
	do("GET", d.verdictd, "/v1/approvals/{id}", "/v1/approvals/apr_none?wait=2m", agentToken, "", nil)
	do("POST", d.verdictd, "/v1/approvals/{id}", "/v1/approvals/apr_none", agentToken, "application/json",
		js(map[string]string{"decision": "approve", "arguments_digest": "sha256:" + strings.Repeat("0", 64)}))
	for _, base := range []string{d.verdictd, d.executor} {
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			do("GET", base, p, p, "", "", nil)
		}
	}

	// Every route served was exercised, so that none is described without being checked.
	for _, r := range routes {
		if !s.seen[r] {
			t.Errorf("no answer of %s was validated", r)
		}
	}
	// And every described operation is a served route: the description promises nothing more.
	for _, p := range s.Paths() {
		for _, m := range s.Methods(p) {
			if r := m + " " + p; !slices.Contains(routes, r) {
				t.Errorf("api/openapi.yaml describes %s, which neither daemon serves", r)
			}
		}
	}
}
