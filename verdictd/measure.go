package verdictd

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/verdictgate/verdict/measure"
	"github.com/verdictgate/verdict/upstream"
)

// newMeasurer returns the policy's measurer: HTTP GETs and read-only MCP tools on the servers of
// the policy in force, observed by the measurement metrics.
func (s *Service) newMeasurer(client *http.Client) *measure.Measurer {
	return measure.New(measure.Options{
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
	})
}
