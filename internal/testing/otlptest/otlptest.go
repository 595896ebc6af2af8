// Package otlptest is an OTLP/HTTP traces receiver for tests: it decodes what the daemons'
// exporters send (protobuf, as the OpenTelemetry Collector's OTLP receiver takes it) and keeps
// every span.
package otlptest

import (
	"cmp"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span.
type Span struct {
	Service      string
	Name         string
	TraceID      string
	SpanID       string
	ParentSpanID string
	Kind         int32
	Attrs        map[string]string
	Links        []Link
}

// Link is a span's link to another span.
type Link struct {
	TraceID, SpanID string
	Attrs           map[string]string
}

// Receiver is a running receiver; URL is its traces endpoint.
type Receiver struct {
	URL    string
	mu     sync.Mutex
	spans  []Span
	update chan struct{}
}

// New starts a receiver, stopped when t ends.
func New(t testing.TB) *Receiver {
	r := &Receiver{update: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/v1/traces"
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body := io.Reader(req.Body)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Service: service, Name: s.Name, TraceID: hex.EncodeToString(s.TraceId),
					SpanID: hex.EncodeToString(s.SpanId), ParentSpanID: hex.EncodeToString(s.ParentSpanId),
					Kind: int32(s.Kind), Attrs: map[string]string{}}
				for _, a := range s.Attributes {
					sp.Attrs[a.Key] = value(a.GetValue())
				}
				for _, l := range s.Links {
					link := Link{TraceID: hex.EncodeToString(l.TraceId), SpanID: hex.EncodeToString(l.SpanId), Attrs: map[string]string{}}
					for _, a := range l.Attributes {
						link.Attrs[a.Key] = value(a.GetValue())
					}
					sp.Links = append(sp.Links, link)
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	select {
	case r.update <- struct{}{}:
	default:
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collpb.ExportTraceServiceResponse{})
	w.Write(out)
}

// value is an attribute's value as text: a string as it is, anything else as protobuf prints it.
func value(v *commonpb.AnyValue) string {
	return cmp.Or(v.GetStringValue(), v.String())
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Wait waits until cond holds for the spans received, or fails t after a minute (a guard
// against a hang, not a measure).
func (r *Receiver) Wait(t testing.TB, what string, cond func([]Span) bool) []Span {
	t.Helper()
	guard := time.After(time.Minute)
	for {
		if s := r.Spans(); cond(s) {
			return s
		}
		select {
		case <-r.update:
		case <-guard:
			t.Fatalf("otlp receiver: gave up waiting for %s; got %d spans", what, len(r.Spans()))
		}
	}
}
