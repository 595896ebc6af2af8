package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
)

func TestFileSourceErrors(t *testing.T) {
	ctx := context.Background()
	good := file(writeExecutionsJSONL(t, tempPath(t, "x.jsonl"), nil))

	junk := tempPath(t, "junk.bin")
	if err := os.WriteFile(junk, []byte("\x00\x01 not records at all, not bbolt either ........"), 0o600); err != nil {
		t.Fatal(err)
	}
	badLine := tempPath(t, "bad.jsonl")
	ok := issued("rec_1", "v1", d1)
	if err := os.WriteFile(badLine, append(append(ok.json(t), '\n'), "{\"record_id\": \"rec_2\", \"outcome\": \n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	noID := tempPath(t, "noid.jsonl")
	if err := os.WriteFile(noID, []byte(`{"outcome":"hold"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	locked := writeBolt(t, tempPath(t, "locked.db"), []dec{ok}, nil)
	db, err := store.Open(locked, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(ctx) })

	tests := []struct {
		name string
		path string
		is   error
		as   any
		text string
	}{
		{name: "missing file", path: tempPath(t, "missing.db"), is: fs.ErrNotExist},
		{name: "directory", path: t.TempDir(), text: "is a directory"},
		{name: "neither bbolt nor JSONL", path: junk, is: ErrUnknownFormat},
		{name: "truncated line", path: badLine, as: new(*store.LineError), text: "line 2"},
		{name: "record without id", path: noID, is: store.ErrInvalid},
		{name: "file held by a daemon", path: locked, is: store.ErrLocked},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(ctx, []Source{file(tc.path)}, []Source{good}, Options{})
			var se *SourceError
			if !errors.As(err, &se) || se.Source != tc.path || se.Records != "decision" {
				t.Fatalf("err = %v, want a *SourceError for %s", err, tc.path)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want %v", err, tc.is)
			}
			if tc.as != nil && !errors.As(err, tc.as) {
				t.Errorf("err = %v, want %T", err, tc.as)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err = %q, want it to mention %q", err, tc.text)
			}
		})
	}
}

func TestEmptyExportIsNoRecords(t *testing.T) {
	for _, content := range []string{"", "\n\n  \n"} {
		p := tempPath(t, "empty.jsonl")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), []Source{file(p)}, []Source{file(p)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Clean || r.Decisions.Total != 0 || r.Executions.Total != 0 {
			t.Errorf("report = %+v", r)
		}
	}
}

// TestPipe reads an export from a pipe, as a shell's process substitution passes it: the file
// is opened once and never seeked.
func TestPipe(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/dev/fd paths to pipes are Linux behaviour")
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	go func() {
		defer pw.Close()
		for i := range 100 {
			d := issued(fmt.Sprintf("rec_%03d", i), fmt.Sprintf("v%03d", i), d1)
			pw.Write(append(d.json(t), '\n'))
		}
	}()
	xs := file(writeExecutionsJSONL(t, tempPath(t, "x.jsonl"), []api.ExecutionRecord{exe("exe_1", "v007", "rec_007", d1, api.ExecutionExecuted)}))
	r, err := Run(context.Background(), []Source{file(fmt.Sprintf("/dev/fd/%d", pr.Fd()))}, []Source{xs}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Clean || r.Decisions.Total != 100 || r.Pairs.Paired != 1 {
		t.Errorf("report = %+v", r)
	}
}

// daemon serves the records endpoints the way verdictd and the executor do: JSONL exports of
// a real bbolt file behind an admin bearer token.
type daemon struct {
	db      *store.DB
	token   string
	queries atomic.Value // the last query string seen
}

func newDaemon(t *testing.T, decs []dec, execs []api.ExecutionRecord) *daemon {
	t.Helper()
	path := writeBolt(t, tempPath(t, "daemon.db"), decs, execs)
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return &daemon{db: db, token: "admin-secret"}
}

func (d *daemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+d.token {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"code":"unauthorized","message":"the admin token is required"}}`)
		return
	}
	d.queries.Store(r.URL.RawQuery)
	since, err := time.Parse(time.RFC3339Nano, r.URL.Query().Get("since"))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"code":"bad_since","message":"since must be an RFC 3339 time"}}`)
		return
	}
	var mask store.Masker
	if r.URL.Query().Get("mask") == "1" {
		mask = store.DefaultMask()
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	switch r.URL.Path {
	case "/v1/records":
		store.ServeExport(w, func(out io.Writer) (int, error) {
			return d.db.Decisions().ExportJSONLCount(r.Context(), out, since, mask)
		})
	case "/v1/executions":
		store.ServeExport(w, func(out io.Writer) (int, error) {
			return d.db.Executions().ExportJSONLCount(r.Context(), out, since, mask)
		})
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"code":"not_found","message":"no such endpoint"}}`)
	}
}

func TestHTTPSources(t *testing.T) {
	ctx := context.Background()
	verdictd := newDaemon(t, []dec{issued("rec_1", "v1", d1), issued("rec_2", "v2", d1)}, nil)
	execA := newDaemon(t, nil, []api.ExecutionRecord{exe("exe_a", "v1", "rec_1", d1, api.ExecutionExecuted)})
	execB := newDaemon(t, nil, []api.ExecutionRecord{
		onExecutor(exe("exe_b", "v1", "rec_1", d1, api.ExecutionExecuted), "executor-b"),
		onExecutor(exe("exe_c", "v1", "rec_1", d1, api.ExecutionNotExecuted), "executor-b"),
	})
	vs := httptest.NewServer(verdictd)
	defer vs.Close()
	as := httptest.NewServer(execA)
	defer as.Close()
	// One executor behind TLS, as a deployment would run it.
	bs := httptest.NewUnstartedServer(execB)
	bs.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below is expected
	bs.StartTLS()
	defer bs.Close()

	src := func(t *testing.T, url, token string, client *http.Client) Source {
		t.Helper()
		s, err := ParseSource(url, SourceOptions{Token: token, Client: client})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("merged over HTTP and HTTPS", func(t *testing.T) {
		r, err := Run(ctx,
			[]Source{src(t, vs.URL, "admin-secret", nil)},
			[]Source{src(t, as.URL+"/", "admin-secret", nil), src(t, bs.URL, "admin-secret", bs.Client())},
			Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(r); len(got) != 1 || got[0] != ExecutedMoreThanOnce {
			t.Fatalf("anomalies = %+v", r.Anomalies)
		}
		if r.Executions.Total != 3 || r.Executions.RefusalsByReason["replayed"] != 1 || r.Pairs.Paired != 1 {
			t.Errorf("report = %+v", r)
		}
		for _, d := range []*daemon{verdictd, execA} {
			q, _ := d.queries.Load().(string)
			if !strings.Contains(q, "mask=1") || !strings.Contains(q, "since=1970-01-01T00%3A00%3A00Z") {
				t.Errorf("query = %q", q)
			}
		}
	})

	t.Run("a base URL that already names the endpoint", func(t *testing.T) {
		_, err := Run(ctx, []Source{src(t, vs.URL+"/v1/records", "admin-secret", nil)},
			[]Source{src(t, as.URL+"/v1/executions/", "admin-secret", nil)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
	})

	errTests := []struct {
		name   string
		source Source
		text   []string
	}{
		{"wrong token", src(t, vs.URL, "guess", nil), []string{"401", "unauthorized", "admin token"}},
		{"no token", src(t, vs.URL, "", nil), []string{"401"}},
		{"not a daemon's base URL", src(t, vs.URL+"/api", "admin-secret", nil), []string{"404", "base URL"}},
		{"untrusted certificate", src(t, bs.URL, "admin-secret", nil), []string{"certificate"}},
	}
	for _, tc := range errTests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(ctx, []Source{tc.source}, []Source{src(t, as.URL, "admin-secret", nil)}, Options{})
			var se *SourceError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *SourceError", err)
			}
			for _, s := range tc.text {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("err = %q, want it to mention %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "admin-secret") {
				t.Errorf("err = %q shows the token", err)
			}
		})
	}
}

func TestHTTPRefusesRedirects(t *testing.T) {
	verdictd := newDaemon(t, []dec{issued("rec_1", "v1", d1)}, nil)
	target := httptest.NewServer(verdictd)
	defer target.Close()
	var leaked atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
	}))
	defer elsewhere.Close()
	redirector := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/v1/records", http.StatusFound))
	defer redirector.Close()

	s, err := ParseSource(redirector.URL, SourceOptions{Token: "admin-secret"})
	if err != nil {
		t.Fatal(err)
	}
	xs := file(writeExecutionsJSONL(t, tempPath(t, "x.jsonl"), nil))
	_, err = Run(context.Background(), []Source{s}, []Source{xs}, Options{})
	if err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Fatalf("err = %v, want a refused redirect", err)
	}
	if leaked.Load() {
		t.Error("the token reached the redirect's target")
	}
}

func TestParseSource(t *testing.T) {
	tests := []struct {
		loc     string
		opts    SourceOptions
		kind    string // "file", "http" or "" for an error
		errText string
	}{
		{loc: "/var/lib/verdictd/verdictd.db", kind: "file"},
		{loc: "records.jsonl", kind: "file"},
		{loc: "http://127.0.0.1:8080", kind: "http"},
		{loc: "http://localhost:8080", kind: "http"},
		{loc: "http://[::1]:8080", kind: "http"},
		{loc: "HTTPS://verdictd.internal:8443", kind: "http"},
		{loc: "http://verdictd.internal:8080", errText: "in clear"},
		{loc: "http://verdictd.internal:8080", opts: SourceOptions{AllowPlainHTTP: true}, kind: "http"},
		{loc: "https://admin:secret@verdictd.internal", errText: "credentials"},
		{loc: "https://verdictd.internal/v1/records?since=2026-01-01T00:00:00Z", errText: "without a query"},
		{loc: "https://", errText: "no host"},
		{loc: "", errText: "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.loc, func(t *testing.T) {
			s, err := ParseSource(tc.loc, tc.opts)
			if tc.kind == "" {
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.errText)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("err = %q shows the credential", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch s.(type) {
			case *File:
				if tc.kind != "file" {
					t.Errorf("got a file source for %q", tc.loc)
				}
			case *HTTP:
				if tc.kind != "http" {
					t.Errorf("got an HTTP source for %q", tc.loc)
				}
			}
		})
	}
}

func TestNewHTTPClient(t *testing.T) {
	if _, err := NewHTTPClient(TLSOptions{CertFile: "cert.pem"}); err == nil {
		t.Error("a certificate without its key was accepted")
	}
	notPEM := tempPath(t, "ca.pem")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	if _, err := NewHTTPClient(TLSOptions{CAFile: notPEM}); err == nil {
		t.Error("a CA bundle without certificates was accepted")
	}
	if _, err := NewHTTPClient(TLSOptions{CAFile: tempPath(t, "missing.pem")}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v", err)
	}
}
