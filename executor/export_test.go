package executor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/audit"
)

// executeN runs n transfers, each under its own verdict, and returns their verdict ids.
func (e *env) executeN(n int) []string {
	e.t.Helper()
	args := `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`
	var ids []string
	for range n {
		c := e.claims(transferArgs)
		if r := e.execute(e.sign(c), args); r.Status != http.StatusOK {
			e.t.Fatalf("execute: %+v", r)
		}
		ids = append(ids, c.ID)
	}
	return ids
}

// getExport reads an export to its end and returns the response (its Trailer filled), the
// body and the error that ended the read.
func getExport(t *testing.T, url string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
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

// TestExportConfirmsItsEnd: every export of GET /v1/executions ends with the completion
// trailers, whose count is the number of lines sent, and the audit takes it as confirmed.
func TestExportConfirmsItsEnd(t *testing.T) {
	e := newEnv(t, envOpts{})
	ids := e.executeN(3)
	tests := []struct {
		name  string
		query string
		lines int
	}{
		{"everything", "", 3},
		{"everything, masked", "?mask=1&since=1970-01-01T00:00:00Z", 3},
		{"one verdict", "?verdict_id=" + ids[1], 1},
		{"an unknown verdict", "?verdict_id=nope", 0},
		{"since a future time", "?since=2200-01-01T00:00:00Z", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, err := getExport(t, e.srv.URL+"/v1/executions"+tc.query)
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
			if err := api.CheckExportTrailer(resp.Trailer, tc.lines); err != nil {
				t.Error(err)
			}
		})
	}

	// The audit reads the export over HTTP as confirmed. Without decision records each
	// execution is an anomaly, which is the audit's finding, not a failed read.
	none := filepath.Join(t.TempDir(), "decisions.jsonl")
	if err := os.WriteFile(none, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := audit.ParseSource(e.srv.URL, audit.SourceOptions{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	r, err := audit.Run(context.Background(), []audit.Source{&audit.File{Path: none}}, []audit.Source{src}, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if x := r.Sources[1]; x.Read != 3 || x.Completeness != audit.Confirmed || r.Pairs.Unpaired != 3 {
		t.Errorf("sources %+v, pairs %+v", r.Sources, r.Pairs)
	}
}

// failAfterFirstWrite ends a request's context once the response has sent its first bytes,
// as a shutdown or a store failure ends an export midway.
func failAfterFirstWrite(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		h.ServeHTTP(&cancelOnWrite{ResponseWriter: w, cancel: cancel}, r.WithContext(ctx))
	})
}

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
	e.executeN(12)
	_, whole, err := getExport(t, e.srv.URL+"/v1/executions")
	if err != nil {
		t.Fatal(err)
	}
	// More than the export's write buffer, so that the failure comes after bytes went out.
	if len(whole) < 8<<10 {
		t.Fatalf("the export is only %d bytes", len(whole))
	}

	failing := httptest.NewServer(failAfterFirstWrite(e.svc.Handler()))
	defer failing.Close()
	resp, body, err := getExport(t, failing.URL+"/v1/executions")
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
	none := filepath.Join(t.TempDir(), "decisions.jsonl")
	if err := os.WriteFile(none, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = audit.Run(context.Background(), []audit.Source{&audit.File{Path: none}}, []audit.Source{src}, audit.Options{})
	var se *audit.SourceError
	if !errors.As(err, &se) || se.Records != "execution" {
		t.Fatalf("audit over a broken export: %v", err)
	}

	// Failing before the first byte leaves the status unsent: an error, without trailers.
	early := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		cancel()
		e.svc.Handler().ServeHTTP(w, r.WithContext(ctx))
	}))
	defer early.Close()
	resp, body, err = getExport(t, early.URL+"/v1/executions")
	if err != nil || resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"error"`) {
		t.Errorf("status %d, %v: %s", resp.StatusCode, err, body)
	}
	if resp.Header.Get("Trailer") != "" || len(resp.Trailer) != 0 {
		t.Errorf("an error response declares trailers: %v %v", resp.Header, resp.Trailer)
	}
}
