package verdictd

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/tracing"
	"github.com/verdictgate/verdict/measure"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

// tracedMeasurer runs each measurement in a span of its own.
type tracedMeasurer struct {
	m  gates.Measurer
	tr *tracing.Tracing
}

func (t tracedMeasurer) Measure(ctx context.Context, m *policy.Measurement, inputs map[string]any) (any, error) {
	via := "http"
	if m.MCP != nil {
		via = "mcp"
	}
	ctx, span := t.tr.Start(ctx, "measurement "+m.Name, trace.SpanKindClient,
		attribute.String("verdict.measurement", m.Name), attribute.String("verdict.measurement.source", via))
	defer span.End()
	v, err := t.m.Measure(ctx, m, inputs)
	if err != nil {
		tracing.Fail(span, "lookup_failed")
	}
	return v, err
}

// newMeasurer returns the policy's measurer: HTTP GETs and read-only MCP tools on the servers of
// the policy in force, observed by the measurement metrics and traced.
func (s *Service) newMeasurer(client *http.Client) gates.Measurer {
	return tracedMeasurer{tr: s.tr, m: measure.New(measure.Options{
		HTTPClient: client,
		MCP: func(ctx context.Context, server string) (*upstream.Client, error) {
			cat := s.currentCatalog()
			if cat == nil {
				return nil, errors.New("no tool catalog loaded")
			}
			return cat.Client(ctx, server)
		},
		Observe: func(via string, d time.Duration, err error) {
			s.metrics.measureDur.WithLabelValues(via).Observe(d.Seconds())
			if err != nil {
				s.metrics.measureFail.Inc()
			}
		},
	})}
}
