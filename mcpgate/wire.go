package mcpgate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/internal/tracing"
)

// What observe mode counts, beside the outcomes, for a call it could not preflight: one whose
// request could not be built, and one verdictd did not answer.
const (
	outcomeInvalidRequest = "invalid_request"
	outcomePreflightError = "preflight_error"
)

// gateService is verdictd or the executor, as the gateway calls it: errors name which.
type gateService struct {
	name string
	api  *client.Client
}

func newDaemon(name, base, token string, hc *http.Client) (*gateService, error) {
	c := *hc
	c.Transport = traceContext{cmp.Or(hc.Transport, http.DefaultTransport)}
	api, err := client.New(base, client.WithToken(token), client.WithHTTPClient(&c))
	if err != nil {
		return nil, fmt.Errorf("%s.url: %w", name, err)
	}
	return &gateService{name: name, api: api}, nil
}

// traceContext is a transport that sends the trace context of a request's context along: the
// call's trace goes on to verdictd and the executor.
type traceContext struct{ base http.RoundTripper }

func (t traceContext) RoundTrip(r *http.Request) (*http.Response, error) {
	if trace.SpanContextFromContext(r.Context()).IsValid() {
		// A round tripper must not change the request it was given.
		r = r.Clone(r.Context())
		tracing.InjectHeader(r.Context(), r.Header)
	}
	return t.base.RoundTrip(r)
}

// preflight runs one preflight. Any answer but 200 with a record is an error: nothing may
// proceed on it.
func (d *gateService) preflight(ctx context.Context, req *api.Request) (*api.Record, error) {
	rec, err := d.api.Preflight(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.name, err)
	}
	return rec, nil
}

// ready asks the daemon's /readyz whether it can take requests.
func (d *gateService) ready(ctx context.Context) error {
	err := d.api.Ready(ctx)
	if e, ok := errors.AsType[*client.Error](err); ok {
		return fmt.Errorf("%s is not ready (HTTP %d)", d.name, e.Status)
	}
	if err != nil {
		return fmt.Errorf("%s is not reachable: %w", d.name, err)
	}
	return nil
}

// execution is the executor's answer to POST /v1/execute and the status it came with. Its
// Execution and Error are never nil: an answer without one has the zero one.
type execution struct {
	api.ExecuteAnswer
	Status int
}

// reason is the record's reason, or the error code of a refusal without one.
func (x *execution) reason() string { return cmp.Or(x.Execution.Reason, x.Error.Code) }

// execute presents the verdict. An answer of any status is data; only no answer, or one that
// cannot be read, is an error.
func (d *gateService) execute(ctx context.Context, verdict string, args json.RawMessage) (*execution, error) {
	ans, err := d.api.Execute(ctx, verdict, args)
	status := http.StatusOK
	if e, ok := errors.AsType[*client.Error](err); ok && ans != nil {
		status = e.Status
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", d.name, err)
	}
	x := &execution{ExecuteAnswer: *ans, Status: status}
	if x.Execution == nil {
		x.Execution = new(api.ExecutionRecord)
	}
	if x.Error == nil {
		x.Error = new(api.ErrorDetail)
	}
	return x, nil
}

// connected asks the executor whether the user whose token the request carries has an account
// connected at server, waiting for one as long as ctx lets it (GET /v1/connections/{server}).
func (d *gateService) connected(ctx context.Context, server string) (bool, error) {
	wait := time.Duration(0)
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl) - time.Second
	}
	if wait <= 0 {
		return false, nil
	}
	c, err := d.api.Connection(ctx, server, wait)
	if err != nil {
		return false, fmt.Errorf("%s: %w", d.name, err)
	}
	return c.Connected, nil
}
