package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/client"
)

// TestRefusalsAreTyped: every answer but the expected one is an error; a refusal carries the
// envelope's code, and an answer without an envelope an empty code.
func TestRefusalsAreTyped(t *testing.T) {
	for _, tc := range []struct {
		name, body  string
		status      int
		code        string
		wantTyped   bool
		wantAnswer  bool // Execute returns the answer beside the error
		messagePart string
	}{
		{"envelope", `{"error":{"code":"unauthorized","message":"a caller token is required"}}`, 401, "unauthorized", true, true, "caller token"},
		{"proxy page", `<html>bad gateway</html>`, 502, "", true, false, "bad gateway"},
		{"refused execution", `{"execution":{"record_id":"x","actor":"executor","execution_decision":"not_executed"},"error":{"code":"replayed","message":"m"}}`, 409, "replayed", true, true, "m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := client.New(srv.URL, client.WithToken("t"))
			if err != nil {
				t.Fatal(err)
			}
			ans, err := c.Execute(context.Background(), "v", json.RawMessage(`{}`))
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("Execute err = %v, want *client.Error", err)
			}
			if e.Status != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.messagePart) {
				t.Errorf("Execute error = %+v", e)
			}
			if (ans != nil) != tc.wantAnswer {
				t.Errorf("Execute answer = %v, want one: %v", ans, tc.wantAnswer)
			}
			if tc.code == "replayed" {
				return // a preflight answer has no execution record
			}
			rec, err := c.Preflight(context.Background(), &api.Request{Principal: "p"})
			if !errors.As(err, &e) || rec != nil || e.Status != tc.status || e.Code != tc.code {
				t.Errorf("Preflight = %v, %v", rec, err)
			}
		})
	}
}

// TestPreflightSendsTokens: the caller token, the subject token from the context, never the
// admin token on a preflight.
func TestPreflightSendsTokens(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer caller" || r.Header.Get(client.SubjectTokenHeader) != "user" {
			w.WriteHeader(401)
			return
		}
		w.Write([]byte(`{"outcome":"ask_user","record_id":"r1"}`))
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL, client.WithToken("caller"), client.WithAdminToken("admin"))
	rec, err := c.Preflight(client.WithSubjectToken(context.Background(), "user"), &api.Request{Principal: "p"})
	if err != nil || rec.Outcome != api.OutcomeAskUser {
		t.Fatalf("Preflight = %v, %v", rec, err)
	}
}

// TestPreflightRefusesEmptyOrOversizedAnswers: a 200 that decides nothing, or is larger than
// the limit, never passes for a record.
func TestPreflightRefusesEmptyOrOversizedAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       error
	}{
		{"no outcome", `{"record_id":"r1"}`, client.ErrNoOutcome},
		{"oversized", `{"outcome":"verdict_issued","advisory_notes":"` + strings.Repeat("x", client.MaxAnswerBytes) + `"}`, client.ErrAnswerTooLarge},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(tc.body)) }))
		c, _ := client.New(srv.URL)
		_, err := c.Preflight(context.Background(), &api.Request{})
		srv.Close()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestExportTrailers: an export counts as whole only when its trailers confirm exactly the
// records that arrived; the records that did arrive are handed over either way.
func TestExportTrailers(t *testing.T) {
	for _, tc := range []struct {
		name            string
		complete, count string
		lines           string
		wantN           int
		wantIncomplete  bool
	}{
		{"confirmed", "true", "2", "{\"a\":1}\n{\"a\":2}\n", 2, false},
		{"confirmed empty", "true", "0", "", 0, false},
		{"no trailers", "", "", "{\"a\":1}\n", 1, true},
		{"a record lost", "true", "3", "{\"a\":1}\n{\"a\":2}\n", 2, true},
		{"count without completion", "", "2", "{\"a\":1}\n{\"a\":2}\n", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer admin" {
					w.WriteHeader(401)
					return
				}
				w.Header().Set("Trailer", api.ExportCompleteTrailer+", "+api.ExportRecordsTrailer)
				w.Write([]byte(tc.lines))
				if tc.complete != "" {
					w.Header().Set(api.ExportCompleteTrailer, tc.complete)
				}
				if tc.count != "" {
					w.Header().Set(api.ExportRecordsTrailer, tc.count)
				}
			}))
			defer srv.Close()
			c, _ := client.New(srv.URL, client.WithToken("caller"), client.WithAdminToken("admin"))
			got := 0
			n, err := c.Records(context.Background(), client.Query{}, func(json.RawMessage) error { got++; return nil })
			if n != tc.wantN || got != tc.wantN {
				t.Errorf("n = %d, handed %d, want %d", n, got, tc.wantN)
			}
			if errors.Is(err, api.ErrExportIncomplete) != tc.wantIncomplete || (err != nil) != tc.wantIncomplete {
				t.Errorf("err = %v, want incomplete: %v", err, tc.wantIncomplete)
			}
		})
	}
}

// TestExportAborted: a daemon that aborts an export midway (as verdictd and the executor do
// when one fails after its first bytes) is an incomplete export, not a short one.
func TestExportAborted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", api.ExportCompleteTrailer+", "+api.ExportRecordsTrailer)
		w.Write([]byte("{\"a\":1}\n"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL)
	n, err := c.Executions(context.Background(), client.Query{}, func(json.RawMessage) error { return nil })
	if n != 1 || !errors.Is(err, api.ErrExportIncomplete) {
		t.Fatalf("n = %d, err = %v", n, err)
	}
}

func TestNewRefusesBadBase(t *testing.T) {
	for _, base := range []string{"", "verdictd:8443", "ftp://h", "http://"} {
		if _, err := client.New(base); err == nil {
			t.Errorf("New(%q) accepted", base)
		}
	}
}
