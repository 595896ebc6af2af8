package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
)

// exportServer is a real net/http server (over TLS with HTTP/2 when http2 is set) whose
// records endpoint answers with end.
func exportServer(t *testing.T, http2 bool, end func(w http.ResponseWriter)) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer admin-secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if want := map[bool]int{false: 1, true: 2}[http2]; r.ProtoMajor != want {
			t.Errorf("request over %s, want HTTP/%d", r.Proto, want)
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		end(w)
	}))
	if http2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// TestHTTPExportMustConfirmItsEnd: an HTTP source counts only when the daemon's trailers
// confirm the end of the export and the number of records read. Every server below sends
// nothing but valid lines; only how the response ends differs.
func TestHTTPExportMustConfirmItsEnd(t *testing.T) {
	ctx := context.Background()
	var lines []byte
	for i := range 3 {
		x := exe(fmt.Sprintf("exe_%d", i), fmt.Sprintf("v%d", i), fmt.Sprintf("rec_%d", i), d1, api.ExecutionExecuted)
		b, err := json.Marshal(&x)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(append(lines, b...), '\n')
	}
	decisions := file(writeDecisionsJSONL(t, tempPath(t, "d.jsonl"), []dec{
		issued("rec_0", "v0", d1), issued("rec_1", "v1", d1), issued("rec_2", "v2", d1),
	}))
	declare := func(w http.ResponseWriter) {
		w.Header().Set("Trailer", api.ExportCompleteTrailer+", "+api.ExportRecordsTrailer)
	}
	confirm := func(w http.ResponseWriter, complete, records string) {
		w.Header().Set(api.ExportCompleteTrailer, complete)
		w.Header().Set(api.ExportRecordsTrailer, records)
	}
	// flushed writes the lines and pushes them to the client before the handler decides how
	// to end, as a long export does.
	flushed := func(w http.ResponseWriter, b []byte) {
		w.Write(b)
		w.(http.Flusher).Flush()
	}

	tests := []struct {
		name    string
		end     func(w http.ResponseWriter)
		wantErr string // "" for a confirmed read
	}{
		{
			name: "the export's own trailers",
			end: func(w http.ResponseWriter) {
				store.ServeExport(w, func(out io.Writer) (int, error) {
					_, err := out.Write(lines)
					return 3, err
				})
			},
		},
		{
			name: "trailers set through http.TrailerPrefix",
			end: func(w http.ResponseWriter) {
				flushed(w, lines)
				w.Header().Set(http.TrailerPrefix+api.ExportCompleteTrailer, "true")
				w.Header().Set(http.TrailerPrefix+api.ExportRecordsTrailer, "3")
			},
		},
		{
			name: "a clean chunked end without trailers",
			end: func(w http.ResponseWriter) {
				flushed(w, lines)
			},
			wantErr: "did not confirm the end of the stream",
		},
		{
			name: "declared trailers never set (an export that failed midway)",
			end: func(w http.ResponseWriter) {
				declare(w)
				flushed(w, lines)
			},
			wantErr: "did not confirm the end of the stream",
		},
		{
			name: "a whole body with its Content-Length and no trailers",
			end: func(w http.ResponseWriter) {
				w.Header().Set("Content-Length", strconv.Itoa(len(lines)))
				w.Write(lines)
			},
			wantErr: "did not confirm the end of the stream",
		},
		{
			name: "cut at a line boundary: the daemon wrote more records",
			end: func(w http.ResponseWriter) {
				declare(w)
				flushed(w, lines)
				confirm(w, "true", "4")
			},
			wantErr: "the daemon wrote 4 records, 3 arrived",
		},
		{
			name: "fewer records confirmed than arrived",
			end: func(w http.ResponseWriter) {
				declare(w)
				flushed(w, lines)
				confirm(w, "true", "2")
			},
			wantErr: "the daemon wrote 2 records, 3 arrived",
		},
		{
			name: "complete is not true",
			end: func(w http.ResponseWriter) {
				declare(w)
				flushed(w, lines)
				confirm(w, "false", "3")
			},
			wantErr: "did not confirm the end of the stream",
		},
		{
			name: "a count that is not a number",
			end: func(w http.ResponseWriter) {
				declare(w)
				flushed(w, lines)
				confirm(w, "true", "three")
			},
			wantErr: `bad Verdict-Export-Records trailer "three"`,
		},
		{
			name: "completion without a count",
			end: func(w http.ResponseWriter) {
				declare(w)
				flushed(w, lines)
				w.Header().Set(api.ExportCompleteTrailer, "true")
			},
			wantErr: "bad Verdict-Export-Records trailer",
		},
		{
			name: "aborted after a complete line",
			end: func(w http.ResponseWriter) {
				declare(w)
				flushed(w, lines)
				panic(http.ErrAbortHandler)
			},
			// An unexpected EOF over HTTP/1.1, a reset stream over HTTP/2.
			wantErr: "jsonl line 4",
		},
	}
	for _, proto := range []struct {
		name  string
		http2 bool
	}{{"HTTP/1.1", false}, {"HTTP/2", true}} {
		for _, tc := range tests {
			t.Run(proto.name+"/"+tc.name, func(t *testing.T) {
				srv := exportServer(t, proto.http2, tc.end)
				var client *http.Client
				if proto.http2 {
					client = srv.Client()
				}
				src, err := ParseSource(srv.URL, SourceOptions{Token: "admin-secret", Client: client})
				if err != nil {
					t.Fatal(err)
				}
				r, err := Run(ctx, []Source{decisions}, []Source{src}, Options{})
				if tc.wantErr == "" {
					if err != nil {
						t.Fatal(err)
					}
					if !r.Clean || r.Pairs.Paired != 3 {
						t.Errorf("report = %+v", r)
					}
					if got := r.Sources[1]; got.Read != 3 || got.Completeness != Confirmed {
						t.Errorf("execution source = %+v", got)
					}
					return
				}
				var se *SourceError
				if !errors.As(err, &se) || se.Records != "execution" || se.Source != srv.URL {
					t.Fatalf("err = %v (report %+v), want a *SourceError for the execution source", err, r)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %q, want it to mention %q", err, tc.wantErr)
				}
				if !strings.Contains(tc.wantErr, "jsonl line") && !errors.Is(err, api.ErrExportIncomplete) {
					t.Errorf("err = %v, want api.ErrExportIncomplete", err)
				}
			})
		}
	}
}

// TestHTTPSourceAsksForTrailers: the request says the client wants trailers, which an HTTP/1.1
// intermediary may otherwise drop.
func TestHTTPSourceAsksForTrailers(t *testing.T) {
	var te string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		te = r.Header.Get("TE")
		store.ServeExport(w, func(io.Writer) (int, error) { return 0, nil })
	}))
	defer srv.Close()
	src, err := ParseSource(srv.URL, SourceOptions{Token: "admin-secret"})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Executions(context.Background(), func(*api.ExecutionRecord) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if te != "trailers" {
		t.Errorf("TE = %q, want trailers", te)
	}
}

// TestCompletenessInReports: each source says how the audit knows it read all of it, and the
// text report warns about the sources that cannot prove it.
func TestCompletenessInReports(t *testing.T) {
	ctx := context.Background()
	decs := []dec{issued("rec_1", "v1", d1)}
	execs := []api.ExecutionRecord{exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted)}
	boltD := writeBolt(t, tempPath(t, "verdictd.db"), decs, nil)
	jsonlD := writeDecisionsJSONL(t, tempPath(t, "records.jsonl"), decs)
	jsonlX := writeExecutionsJSONL(t, tempPath(t, "executions.jsonl"), execs)
	daemon := httptest.NewServer(newDaemon(t, nil, execs))
	defer daemon.Close()
	httpX, err := ParseSource(daemon.URL, SourceOptions{Token: "admin-secret"})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		decisions  []Source
		executions []Source
		want       []Completeness // in the report's source order: decisions first
		note       string         // "" for no note
	}{
		{"a bbolt file and a daemon", []Source{file(boltD)}, []Source{httpX}, []Completeness{StoreFile, Confirmed}, ""},
		{"one JSONL file", []Source{file(jsonlD)}, []Source{httpX}, []Completeness{Unverified, Confirmed},
			"note: " + jsonlD + " cannot prove it is whole"},
		{"two JSONL files", []Source{file(jsonlD), file(boltD)}, []Source{file(jsonlX)}, []Completeness{Unverified, StoreFile, Unverified},
			"note: " + jsonlD + ", " + jsonlX + " cannot prove they are whole"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(ctx, tc.decisions, tc.executions, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Clean {
				t.Fatalf("anomalies: %+v", r.Anomalies)
			}
			for i, want := range tc.want {
				if got := r.Sources[i].Completeness; got != want {
					t.Errorf("source %s: completeness %q, want %q", r.Sources[i].Source, got, want)
				}
			}

			var text bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			hasNote := strings.Contains(text.String(), "note:")
			if tc.note == "" && hasNote || tc.note != "" && !strings.Contains(text.String(), tc.note) {
				t.Errorf("text report, want note %q:\n%s", tc.note, text.String())
			}
			if tc.note != "" && !strings.Contains(text.String(), "operator's responsibility") {
				t.Errorf("the note does not say who answers for the files:\n%s", text.String())
			}
			if !strings.HasSuffix(text.String(), "clean: no anomaly\n") {
				t.Errorf("text report:\n%s", text.String())
			}

			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var back struct {
				Sources []map[string]any `json:"sources"`
			}
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			for i, s := range back.Sources {
				for _, key := range []string{"source", "records", "read", "duplicates"} {
					if _, ok := s[key]; !ok {
						t.Errorf("json source %d lacks %q: %v", i, key, s)
					}
				}
				if s["completeness"] != string(tc.want[i]) {
					t.Errorf("json source %d: completeness %v, want %q", i, s["completeness"], tc.want[i])
				}
			}
		})
	}
}
