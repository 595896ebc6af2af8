package verdictd

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

func TestMeasureHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/balance":
			// The input arrives escaped: a value cannot add query parameters.
			if r.URL.Query().Get("account") != "110 222&x=1" || r.URL.Query().Has("x") {
				http.Error(w, "bad account", 400)
				return
			}
			w.Write([]byte(`{"balance": 9007199254740993, "list": [1, {"a/b": true}]}`))
		case "/slow":
			time.Sleep(2 * time.Second)
		case "/text":
			w.Write([]byte("not json"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	m := &measurer{client: srv.Client(), catalog: func() *upstream.Catalog { return nil }, metrics: newMetrics()}
	in := map[string]any{"account": "110 222&x=1"}
	tests := []struct {
		name, url, pointer string
		timeout            time.Duration
		want               any
		errHas             string
	}{
		{"value at pointer, exact number", "/balance?account={{account}}", "/balance", 0, json.Number("9007199254740993"), ""},
		{"escaped pointer into an array", "/balance?account={{ account }}", "/list/1/a~1b", 0, true, ""},
		{"missing member", "/balance?account={{account}}", "/nope", 0, nil, "no member"},
		{"unknown input", "/balance?account={{other}}", "/balance", 0, nil, "not known"},
		{"not found", "/missing", "", 0, nil, "404"},
		{"not json", "/text", "", 0, nil, "not JSON"},
		{"timeout", "/slow", "", 50 * time.Millisecond, nil, "deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := &policy.Measurement{Name: "balance", Timeout: tt.timeout,
				HTTP: &policy.HTTPMeasurement{URL: srv.URL + tt.url, Pointer: tt.pointer}}
			got, err := m.Measure(context.Background(), ms, in)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err %v, want it to contain %q", err, tt.errHas)
				}
				if strings.Contains(err.Error(), "110") {
					t.Fatalf("error leaks an input value: %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %#v %v, want %#v", got, err, tt.want)
			}
		})
	}
}

// TestMeasureMCP reads a balance from the real bank server's read-only tool.
func TestMeasureMCP(t *testing.T) {
	cat, err := upstream.NewCatalog(map[string]upstream.Config{
		"bank": {Command: []string{bankBin, "--state", filepath.Join(t.TempDir(), "bank.json")}},
	}, upstream.CatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	m := &measurer{catalog: func() *upstream.Catalog { return cat }, metrics: newMetrics()}
	ms := &policy.Measurement{Name: "balance", MCP: &policy.MCPMeasurement{Server: "bank", Tool: "get_balance",
		Args: map[string]any{"account": "{{from_account}}"}, Pointer: "/balance"}}
	got, err := m.Measure(context.Background(), ms, map[string]any{"from_account": "1102534471"})
	if err != nil || got != json.Number("2000000") {
		t.Fatalf("balance %#v %v", got, err)
	}
	// A business failure of the tool is a failed lookup, not an empty value.
	if _, err := m.Measure(context.Background(), ms, map[string]any{"from_account": "999"}); err == nil {
		t.Fatal("unknown account measured")
	}
}
