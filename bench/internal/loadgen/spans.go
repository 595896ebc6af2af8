package loadgen

import (
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// SpanTally is an OTLP/HTTP traces endpoint on loopback that keeps the duration of every span it
// is sent, by service and span name: where a request's wall time went, across processes.
type SpanTally struct {
	srv *http.Server
	// Env points a daemon's exporter at the tally.
	Env string

	mu    sync.Mutex
	spans map[[2]string][]time.Duration
	bad   int
}

// StartSpanTally starts the endpoint.
func StartSpanTally() (*SpanTally, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &SpanTally{spans: map[[2]string][]time.Duration{}}
	t.srv = &http.Server{Handler: http.HandlerFunc(t.export)}
	go t.srv.Serve(l)
	t.Env = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://" + l.Addr().String() + "/v1/traces"
	return t, nil
}

func (t *SpanTally) export(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	t.mu.Lock()
	if err != nil {
		t.bad++
	}
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				k := [2]string{service, sp.GetName()}
				t.spans[k] = append(t.spans[k], time.Duration(sp.GetEndTimeUnixNano()-sp.GetStartTimeUnixNano()))
			}
		}
	}
	t.mu.Unlock()
	// An empty ExportTraceServiceResponse is zero bytes of protobuf.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// Reset forgets every span so far (those of the warm-up).
func (t *SpanTally) Reset() {
	t.mu.Lock()
	clear(t.spans)
	t.mu.Unlock()
}

// Print writes, per service and span name, the count and the p50 and p90 of the durations.
func (t *SpanTally) Print(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := slices.SortedFunc(maps.Keys(t.spans), func(a, b [2]string) int { return slices.Compare(a[:], b[:]) })
	for _, k := range keys {
		d := slices.Clone(t.spans[k])
		slices.Sort(d)
		fmt.Fprintf(w, "span %s %q: n=%d p50=%dµs p90=%dµs\n", k[0], k[1], len(d),
			d[len(d)/2].Microseconds(), d[len(d)*9/10].Microseconds())
	}
	if t.bad > 0 {
		fmt.Fprintf(w, "span exports not read: %d\n", t.bad)
	}
}

// Close stops the endpoint.
func (t *SpanTally) Close() { t.srv.Close() }
