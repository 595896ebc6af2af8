package executor

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// receiver records the requests a test server is sent and accepts them.
type receiver struct {
	mu   sync.Mutex
	reqs []string // "path auth body"
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, req.URL.Path+" "+req.Header.Get("Authorization")+" "+string(body))
	r.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func (r *receiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reqs...)
}

// TestReceiptSinkFollowsNoRedirect: the receipt and its bearer token go to verdictd.url and
// nowhere else. A redirect is refused whatever its target, also with a caller's client that
// follows redirects: Go's client would re-send the token from https to http on the same host.
func TestReceiptSinkFollowsNoRedirect(t *testing.T) {
	const receipt, token = "eyJhbGciOiJFZERTQSJ9.e30.c2ln", "sink-secret"
	thief := &receiver{}
	thiefSrv := httptest.NewServer(thief)
	defer thiefSrv.Close()
	// The thief under another name of the same machine: another host to the HTTP client.
	otherHost := strings.Replace(thiefSrv.URL, "127.0.0.1", "localhost", 1)

	redirectTo := func(target string, code int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target, code)
		})
	}
	tests := []struct {
		name     string
		verdictd func() *httptest.Server
		client   func(*httptest.Server) *http.Client // nil: the sink's default
		want     string                              // "" = delivered to verdictd
	}{
		{"no redirect", func() *httptest.Server { return httptest.NewServer(&receiver{}) }, nil, ""},
		{"https to http on the same host",
			func() *httptest.Server {
				return httptest.NewTLSServer(redirectTo(thiefSrv.URL+"/v1/receipts", http.StatusTemporaryRedirect))
			},
			(*httptest.Server).Client, "refusing redirect"},
		{"http to another host",
			func() *httptest.Server {
				return httptest.NewServer(redirectTo(otherHost+"/v1/receipts", http.StatusPermanentRedirect))
			},
			nil, "refusing redirect"},
		{"https to http on another host",
			func() *httptest.Server {
				return httptest.NewTLSServer(redirectTo(otherHost+"/v1/receipts", http.StatusTemporaryRedirect))
			},
			(*httptest.Server).Client, "refusing redirect"},
		{"elsewhere on the same server",
			func() *httptest.Server {
				mux := http.NewServeMux()
				mux.Handle("/v1/receipts", redirectTo("/stolen", http.StatusTemporaryRedirect))
				mux.Handle("/stolen", thief)
				return httptest.NewServer(mux)
			},
			nil, "refusing redirect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := tt.verdictd()
			defer srv.Close()
			var client *http.Client
			if tt.client != nil {
				client = tt.client(srv)
			}
			sink, err := newReceiptSink(ReceiptSink{URL: srv.URL, Token: token}, client, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			err = sink.post(context.Background(), receipt)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("post: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("post: %v, want an error saying %q", err, tt.want)
			}
			if got := thief.got(); len(got) != 0 {
				t.Fatalf("the redirect target was sent %q", got)
			}
			if client != nil && client.CheckRedirect != nil {
				t.Fatal("the caller's client had its redirect policy changed")
			}
			if rec, ok := srv.Config.Handler.(*receiver); ok {
				want := "/v1/receipts Bearer " + token + " " + receipt
				if got := rec.got(); len(got) != 1 || got[0] != want {
					t.Fatalf("verdictd was sent %q, want [%q]", got, want)
				}
			}
		})
	}
}

// A receipt verdictd refuses with a 4xx is final: one attempt, logged at error level with
// verdictd's code. A 5xx, 429 or no answer may pass later and is retried.
func TestReceiptSinkRetriesOnlyWhatMayPass(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		attempts int
		want     []string // in the last log record
	}{
		{"refused with a code", 403, `{"error":{"code":"issuer_not_trusted","message":"executor exec-1 is not configured"}}`, 1,
			[]string{`"level":"ERROR"`, `"code":"issuer_not_trusted"`, `"status":403`, `"verdict_id":"v-1"`, "not retried"}},
		{"refused without an envelope", 401, "no", 1, []string{`"level":"ERROR"`, `"status":401`}},
		{"unavailable", 503, `{"error":{"code":"state_store_unavailable","message":"later"}}`, receiptAttempts,
			[]string{`"level":"ERROR"`, `"code":"state_store_unavailable"`, "not delivered", `"attempt":4`}},
		{"too many requests", 429, "", receiptAttempts, []string{`"status":429`}},
		{"accepted", 200, `{"accepted":true}`, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			attempts := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				attempts++
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			var logs syncBuffer
			sink, err := newReceiptSink(ReceiptSink{URL: srv.URL, Token: "t"}, nil, slog.New(slog.NewJSONHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			sink.retryDelay = time.Millisecond
			sink.deliver(context.Background(), receiptJob{token: "a.b.c", verdictID: "v-1"}, 1)
			if attempts != tt.attempts {
				t.Errorf("%d attempts, want %d\n%s", attempts, tt.attempts, logs.String())
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if tt.want == nil {
				if logs.String() != "" {
					t.Errorf("logged %s", logs.String())
				}
				return
			}
			if len(lines) != tt.attempts {
				t.Errorf("%d log records for %d attempts:\n%s", len(lines), tt.attempts, logs.String())
			}
			last := lines[len(lines)-1]
			for _, w := range tt.want {
				if !strings.Contains(last, w) {
					t.Errorf("last record lacks %s: %s", w, last)
				}
			}
		})
	}
}

func TestReceiptSinkRetriesWhenNothingAnswers(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	var logs syncBuffer
	sink, err := newReceiptSink(ReceiptSink{URL: url}, nil, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	sink.retryDelay = time.Millisecond
	sink.deliver(context.Background(), receiptJob{token: "a.b.c", verdictID: "v-1"}, 1)
	if n := strings.Count(logs.String(), "\n"); n != receiptAttempts || !strings.Contains(logs.String(), "not delivered") {
		t.Fatalf("%d records, want %d ending in the failure:\n%s", n, receiptAttempts, logs.String())
	}
}
