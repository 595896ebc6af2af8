package httpx

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestReadErrorRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		write  func(http.ResponseWriter)
		status int
		code   string
		msg    string
		final  bool
	}{
		{"envelope", func(w http.ResponseWriter) {
			WriteError(w, Errorf(http.StatusForbidden, "issuer_not_trusted", "no executor %q", "x"))
		}, 403, "issuer_not_trusted", `no executor "x"`, true},
		{"not an envelope", func(w http.ResponseWriter) { http.Error(w, "bad gateway", http.StatusBadGateway) }, 502, "", "", false},
		{"too many requests", func(w http.ResponseWriter) { WriteError(w, Errorf(429, "slow_down", "later")) }, 429, "slow_down", "later", false},
		{"request timeout", func(w http.ResponseWriter) { w.WriteHeader(http.StatusRequestTimeout) }, 408, "", "", false},
		{"bad request", func(w http.ResponseWriter) { WriteError(w, Errorf(400, "malformed_receipt", "empty body")) }, 400, "malformed_receipt", "empty body", true},
		{"server error", func(w http.ResponseWriter) { WriteError(w, Errorf(503, CodeUnavailable, "later")) }, 503, CodeUnavailable, "later", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tt.write(rec)
			e := ReadError(rec.Code, rec.Body.Bytes())
			if e.Status != tt.status || e.Code != tt.code || e.Message != tt.msg || e.Final() != tt.final {
				t.Fatalf("got %+v final=%v", e, e.Final())
			}
		})
	}
}
