package verdictd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/audit"
)

// getRecords reads an export to its end and returns the response (its Trailer filled), the
// body and the error that ended the read.
func getRecords(t *testing.T, u string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// TestExportConfirmsItsEnd: every answer of GET /v1/records ends with the completion trailers,
// whose count is the number of lines sent, and an audit of verdictd and a real executor over
// their HTTP exports is clean and confirmed.
func TestExportConfirmsItsEnd(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.startExecutor("")
	r3 := e.issue(context.Background())
	if res := e.execute(*r3.Verdict, r3.CallArguments); res.status != http.StatusOK || res.decision != "executed" {
		t.Fatalf("execute: %d %s", res.status, res.body)
	}

	tests := []struct {
		name  string
		query string
		lines int
	}{
		{"everything", "", 3},
		{"everything, masked", "?mask=1&since=1970-01-01T00:00:00Z", 3},
		{"one action key", "?action_key=" + url.QueryEscape(*r3.ActionKey), 3},
		{"one verdict", "?verdict_id=" + *r3.VerdictID, 1},
		{"an unknown verdict", "?verdict_id=nope", 0},
		{"since a future time", "?since=2200-01-01T00:00:00Z", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, err := getRecords(t, e.srv.URL+"/v1/records"+tc.query)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d, %v: %s", resp.StatusCode, err, body)
			}
			if got := bytes.Count(body, []byte("\n")); got != tc.lines {
				t.Fatalf("%d lines, want %d: %s", got, tc.lines, body)
			}
			if resp.Trailer.Get(api.ExportCompleteTrailer) != "true" ||
				resp.Trailer.Get(api.ExportRecordsTrailer) != strconv.Itoa(tc.lines) {
				t.Errorf("trailer %v after %d lines", resp.Trailer, tc.lines)
			}
		})
	}

	decisions, err := audit.ParseSource(e.srv.URL, audit.SourceOptions{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	executions, err := audit.ParseSource(e.exec.URL, audit.SourceOptions{Token: execAdminToken})
	if err != nil {
		t.Fatal(err)
	}
	r, err := audit.Run(context.Background(), []audit.Source{decisions}, []audit.Source{executions}, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Clean || r.Pairs.Paired != 1 || r.Decisions.Total != 3 || r.Executions.Total != 1 {
		t.Fatalf("report %+v", r)
	}
	for _, s := range r.Sources {
		if s.Completeness != audit.Confirmed {
			t.Errorf("source %+v is not confirmed", s)
		}
	}
}

// cancelOnWrite ends the request's context once the response has sent its first bytes, as a
// shutdown or a store failure ends an export midway.
type cancelOnWrite struct {
	http.ResponseWriter
	cancel context.CancelFunc
	once   sync.Once
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.once.Do(c.cancel)
	return n, err
}

// TestExportFailingMidway: an export that fails after its first bytes sends no completion
// trailer and ends abnormally, and the audit refuses it; one that fails before its first byte
// answers with an error status.
func TestExportFailingMidway(t *testing.T) {
	e := newEnv(t, envOpts{})
	for range 6 {
		e.preflight(landlord())
	}
	_, whole, err := getRecords(t, e.srv.URL+"/v1/records")
	if err != nil {
		t.Fatal(err)
	}
	// More than the export's write buffer, so that the failure comes after bytes went out.
	if len(whole) < 8<<10 {
		t.Fatalf("the export is only %d bytes", len(whole))
	}

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		e.svc.Handler().ServeHTTP(&cancelOnWrite{ResponseWriter: w, cancel: cancel}, r.WithContext(ctx))
	}))
	defer failing.Close()
	resp, body, err := getRecords(t, failing.URL+"/v1/records")
	if resp.StatusCode != http.StatusOK || err == nil {
		t.Fatalf("status %d, read error %v: the broken export read as a whole one", resp.StatusCode, err)
	}
	if len(body) >= len(whole) || resp.Trailer.Get(api.ExportCompleteTrailer) != "" {
		t.Errorf("%d of %d bytes, trailer %v", len(body), len(whole), resp.Trailer)
	}
	src, err := audit.ParseSource(failing.URL, audit.SourceOptions{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	none := filepath.Join(t.TempDir(), "executions.jsonl")
	if err := os.WriteFile(none, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = audit.Run(context.Background(), []audit.Source{src}, []audit.Source{&audit.File{Path: none}}, audit.Options{})
	var se *audit.SourceError
	if !errors.As(err, &se) || se.Records != "decision" {
		t.Fatalf("audit over a broken export: %v", err)
	}

	// Failing before the first byte leaves the status unsent: an error, without trailers.
	early := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		cancel()
		e.svc.Handler().ServeHTTP(w, r.WithContext(ctx))
	}))
	defer early.Close()
	resp, body, err = getRecords(t, early.URL+"/v1/records")
	if err != nil || resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"error"`) {
		t.Errorf("status %d, %v: %s", resp.StatusCode, err, body)
	}
	if resp.Header.Get("Trailer") != "" || len(resp.Trailer) != 0 {
		t.Errorf("an error response declares trailers: %v %v", resp.Header, resp.Trailer)
	}
}
