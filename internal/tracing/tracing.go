// Package tracing sets up OpenTelemetry traces for a daemon: spans exported over OTLP/HTTP when
// configured, W3C trace context carried in HTTP headers between the daemons and in MCP _meta
// (traceparent, tracestate) to and from MCP peers.
//
// Tracing is off unless the daemon's config has a tracing section or the environment names an
// OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and
// OTEL_SDK_DISABLED=true turns it off whatever the config says. The exporter honours the
// standard OTEL_EXPORTER_OTLP_* variables (headers, timeout, certificates, compression); the
// config's endpoint, when given, wins over the environment's.
//
// Off, the daemons still pass on the trace context they receive: a host's trace continues
// through the gateway to the tool server even when the gateway exports nothing.
//
// Spans carry ids, names and outcomes — record ids, verdict ids, tools, reasons — never an
// argument value or a token, and a principal only when the config says principals: true.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/verdictgate/verdict/internal/buildinfo"
	"github.com/verdictgate/verdict/internal/confx"
)

// Config is the tracing section of a daemon's config file.
type Config struct {
	// Endpoint is the OTLP/HTTP traces URL (for example http://collector:4318/v1/traces).
	// Empty: the OTEL_EXPORTER_OTLP_* environment decides (default http://localhost:4318).
	Endpoint string `json:"endpoint,omitempty"`
	// SampleRatio is the share of new traces sampled (0 to 1, default 1); a trace the caller
	// sampled is always continued (parent-based).
	SampleRatio *float64 `json:"sample_ratio,omitempty"`
	// Principals records the principal of a call as the span attribute enduser.id. Off by
	// default: a tracing backend is often less guarded than the records.
	Principals bool `json:"principals,omitempty"`
}

// Validate reports every problem of c, placed at its key under prefix.
func (c *Config) Validate(prefix string) []error {
	var errs []error
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			k := confx.Key(prefix, "endpoint")
			errs = append(errs, confx.Place(k, fmt.Errorf("%s: %q is not an http(s) URL", k, c.Endpoint)))
		}
	}
	if r := c.SampleRatio; r != nil && (*r < 0 || *r > 1) {
		k := confx.Key(prefix, "sample_ratio")
		errs = append(errs, confx.Place(k, fmt.Errorf("%s: %v is not between 0 and 1", k, *r)))
	}
	return errs
}

// Tracing is a daemon's tracer. Trace context is carried by the functions of this package
// (InjectHeader, ExtractHeader, InjectMeta, ExtractMeta), the same whether tracing is on or off.
type Tracing struct {
	tracer     trace.Tracer
	shutdown   func(context.Context) error
	principals bool
	enabled    bool
	// What Attrs tells: where spans go and what said so, or why none are exported.
	endpoint, from, off string
	ratio               float64
}

// off is tracing that exports nothing and still passes trace context on; why says so in Attrs.
func off(why string) *Tracing {
	return &Tracing{tracer: noop.NewTracerProvider().Tracer(""), shutdown: func(context.Context) error { return nil }, off: why}
}

// Attrs describe t for the line a daemon logs at start: whether spans are exported and, when
// they are, to which URL (without its userinfo), what named it (the config, an OTLP variable,
// or the exporter's default) and the sample ratio; when not, why.
func (t *Tracing) Attrs() []slog.Attr {
	if !t.enabled {
		return []slog.Attr{slog.Bool("enabled", false), slog.String("reason", t.off)}
	}
	return []slog.Attr{slog.Bool("enabled", true), slog.String("endpoint", t.endpoint),
		slog.String("endpoint_from", t.from), slog.Float64("sample_ratio", t.ratio)}
}

// exportsTo is the URL the OTLP/HTTP exporter sends spans to, and what named it, as the
// exporter resolves it: the config's endpoint; else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it
// is; else OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces after its path; else its default. A
// password in the URL is not repeated.
func exportsTo(cfg *Config, getenv func(string) string) (endpoint, from string) {
	switch {
	case cfg.Endpoint != "":
		endpoint, from = cfg.Endpoint, "config"
	case getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "":
		endpoint, from = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	case getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "":
		endpoint, from = strings.TrimSuffix(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "/")+"/v1/traces", "OTEL_EXPORTER_OTLP_ENDPOINT"
	default:
		endpoint, from = "http://localhost:4318/v1/traces", "default"
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "(not a URL)", from
	}
	return u.Redacted(), from
}

// Setup starts tracing for service ("verdictd", "executor", "mcpgate") as cfg and the
// environment (read through getenv; nil reads none) say; Off when neither asks for it.
func Setup(ctx context.Context, cfg *Config, service string, getenv func(string) string) (*Tracing, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if disabled, _ := strconv.ParseBool(getenv("OTEL_SDK_DISABLED")); disabled {
		return off("OTEL_SDK_DISABLED"), nil
	}
	fromEnv := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if cfg == nil && !fromEnv {
		return off("no tracing section and no OTEL_EXPORTER_OTLP endpoint"), nil
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if errs := cfg.Validate("tracing"); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var opts []otlptracehttp.Option
	if cfg.Endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(cfg.Endpoint))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	ratio := 1.0
	if cfg.SampleRatio != nil {
		ratio = *cfg.SampleRatio
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", service),
		attribute.String("service.version", buildinfo.Read().Version),
	)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	)
	endpoint, from := exportsTo(cfg, getenv)
	return &Tracing{tracer: tp.Tracer("github.com/verdictgate/verdict/" + service),
		shutdown: tp.Shutdown, principals: cfg.Principals, enabled: true,
		endpoint: endpoint, from: from, ratio: ratio}, nil
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t.enabled }

// Shutdown exports what is buffered and stops, within ctx.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.shutdown(ctx) }

// Start starts a span under ctx's.
func (t *Tracing) Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// StartServer starts the server span of a request that arrived with the HTTP headers h. A
// caller trusted for tracing continues its own trace: its span is the parent. Any other
// caller's trace context is only linked: the span starts a trace of its own, so that no caller
// chooses the trace id the request, and what it records, is known by (another user's, say).
// Off, an untrusted caller's request has no trace.
func (t *Tracing) StartServer(ctx context.Context, h http.Header, trusted bool, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if trusted {
		return t.Start(ExtractHeader(ctx, h), name, trace.SpanKindServer, attrs...)
	}
	return t.StartLinked(ctx, trace.SpanContextFromContext(ExtractHeader(context.Background(), h)), name, trace.SpanKindServer, attrs...)
}

// StartLinked starts a span that begins a trace of its own, linked to caller, the trace
// context an untrusted caller sent (none when it is not valid): the caller's trace can be
// followed to it, but the caller does not choose its trace id.
func (t *Tracing) StartLinked(ctx context.Context, caller trace.SpanContext, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind), trace.WithAttributes(attrs...), trace.WithNewRoot()}
	if caller.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: caller, Attributes: []attribute.KeyValue{LinkCaller}}))
	}
	return t.tracer.Start(ctx, name, opts...)
}

// LinkCaller marks the link from a span to the trace context its untrusted caller sent.
var LinkCaller = attribute.String("verdict.link", "caller")

// Principal returns the attribute naming the principal, when the config allows it.
func (t *Tracing) Principal(p string) []attribute.KeyValue {
	if !t.principals || p == "" {
		return nil
	}
	return []attribute.KeyValue{attribute.String("enduser.id", p)}
}

// w3c is the one propagator: W3C trace context, as HTTP and MCP carry it.
var w3c propagation.TraceContext

// InjectHeader writes ctx's trace context into HTTP headers; without one it writes nothing.
func InjectHeader(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		w3c.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// ExtractHeader returns ctx with the trace context of HTTP headers.
func ExtractHeader(ctx context.Context, h http.Header) context.Context {
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}

// MetaKeys are the _meta members MCP trace context travels in.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// InjectMeta writes ctx's trace context into an MCP _meta map (created when nil and there is
// a context to write), and returns it. Without a context it allocates nothing.
func InjectMeta(ctx context.Context, meta map[string]any) map[string]any {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	if meta == nil {
		meta = make(map[string]any, len(c))
	}
	for k, v := range c {
		meta[k] = v
	}
	return meta
}

// ExtractMeta returns ctx with the trace context of an MCP _meta map; members that are not
// strings are ignored.
func ExtractMeta(ctx context.Context, meta map[string]any) context.Context {
	c := propagation.MapCarrier{}
	for _, k := range []string{MetaTraceparent, MetaTracestate} {
		if s, ok := meta[k].(string); ok {
			c[k] = s
		}
	}
	if len(c) == 0 {
		return ctx
	}
	return w3c.Extract(ctx, c)
}

// TraceID is the id of ctx's trace, hex, or "" when there is none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// Fail marks span as failed with a reason code (never a message that could carry a value).
func Fail(span trace.Span, reason string) {
	span.SetAttributes(attribute.String("error.type", reason))
	span.SetStatus(codes.Error, reason)
}
