package gates

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
)

// Capture keeps what one run reads from the world — the conversation state, the measurer, the
// C3 webhook — as it passes the reads on, so that the run can be decided again later from the
// same inputs (Replay). Engine.Capture makes one; it is used by one run.
type Capture struct {
	measurer Measurer
	webhook  Approver

	mu  sync.Mutex
	out api.Capture
}

// Capture returns in with its state, measurer and webhook (the engine's where in has none)
// wrapped by a Capture, and the Capture. A nil measurer or webhook stays nil: the run then
// decides as it would without one.
func (e *Engine) Capture(in Input) (Input, *Capture) {
	c := &Capture{measurer: cmp.Or(in.Measurer, e.measurer), webhook: cmp.Or(in.Webhook, e.webhook)}
	in.State = captureState{cmp.Or(in.State, e.state), c}
	if c.measurer != nil {
		in.Measurer = (*captureMeasurer)(c)
	}
	if c.webhook != nil {
		in.Webhook = (*captureWebhook)(c)
	}
	for _, d := range in.Console {
		c.out.Console = append(c.out.Console, api.CapturedConsole(d))
	}
	return in, c
}

// Result is what the run read, with the request it decided, the definition it was given (its
// name alone when the tool had no usable definition) and the run's time. Call it once the run
// is over.
func (c *Capture) Result(req *api.Request, t Tool, now time.Time) (*api.Capture, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.out
	var err error
	if out.Request, err = json.Marshal(req); err != nil {
		return nil, fmt.Errorf("gates: capture the request: %w", err)
	}
	if out.Tool, err = json.Marshal(t); err != nil {
		return nil, fmt.Errorf("gates: capture the tool: %w", err)
	}
	out.Now = now.UTC().Format(time.RFC3339Nano)
	return &out, nil
}

// keep adds what a read returned to the capture.
func (c *Capture) keep(add func(out *api.Capture)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	add(&c.out)
}

// captureState keeps what the state's reads return; its writes are the state's own.
type captureState struct {
	State
	c *Capture
}

func (s captureState) Gate1Counts(ctx context.Context, conv Conversation) (Gate1Counts, error) {
	n, err := s.State.Gate1Counts(ctx, conv)
	if err == nil {
		s.c.keep(func(out *api.Capture) { out.Gate1 = ptr(api.CapturedGate1(n)) })
	}
	return n, err
}

func (s captureState) SlotAsks(ctx context.Context, conv Conversation, actionKey, slotID string) (int, error) {
	n, err := s.State.SlotAsks(ctx, conv, actionKey, slotID)
	if err == nil {
		s.c.keep(func(out *api.Capture) {
			out.Asks = append(out.Asks, api.CapturedAsk{ActionKey: actionKey, SlotID: slotID, Asks: n})
		})
	}
	return n, err
}

func (s captureState) Question(ctx context.Context, id string) (QuestionBinding, bool, error) {
	b, ok, err := s.State.Question(ctx, id)
	if err == nil {
		q := api.CapturedQuestion{QuestionID: id, Found: ok}
		if ok {
			q.Principal, q.ActionKey, q.SlotID, q.Kind = b.Principal, b.ActionKey, b.SlotID, b.Kind
			q.Value, q.Shown, q.Origin, q.Options = b.Value, b.Shown, string(b.Origin), b.Options
		}
		s.c.keep(func(out *api.Capture) { out.Questions = append(out.Questions, q) })
	}
	return b, ok, err
}

func (s captureState) PriorValue(ctx context.Context, actionKey, field string) (any, bool, error) {
	v, ok, err := s.State.PriorValue(ctx, actionKey, field)
	if err == nil {
		s.c.keep(func(out *api.Capture) {
			out.Prior = append(out.Prior, api.CapturedPrior{ActionKey: actionKey, Field: field, Found: ok, Value: v})
		})
	}
	return v, ok, err
}

type captureMeasurer Capture

// Measure passes the measurement on and keeps its result. The engine measures concurrently.
func (c *captureMeasurer) Measure(ctx context.Context, m *policy.Measurement, inputs map[string]any) (any, error) {
	v, err := c.measurer.Measure(ctx, m, inputs)
	r := api.CapturedResult{Value: v}
	if err != nil {
		r = api.CapturedResult{Error: err.Error()}
	}
	(*Capture)(c).keep(func(out *api.Capture) {
		if out.Measured == nil {
			out.Measured = map[string]api.CapturedResult{}
		}
		out.Measured[m.Name] = r
	})
	return v, err
}

type captureWebhook Capture

func (c *captureWebhook) Approve(ctx context.Context, req ApprovalRequest) (Approval, error) {
	a, err := c.webhook.Approve(ctx, req)
	r := &api.CapturedApproval{Approved: a.Approved, Reason: a.Reason}
	if err != nil {
		r = &api.CapturedApproval{Error: err.Error()}
	}
	(*Capture)(c).keep(func(out *api.Capture) { out.Webhook = r })
	return a, err
}

// ErrNotCaptured is what a replayed run reads for anything its capture does not hold: a
// measurement the recorded run did not perform, a webhook it did not ask. Replay never guesses
// a live answer.
var ErrNotCaptured = errors.New("not read when the call was recorded")

// Replay answers a run from a capture: the state reads as they were read (a count not read
// then is 0, a question or executed value not read then is unknown), the measurements as
// measured and the webhook as it answered, anything else failing with ErrNotCaptured. What the
// run writes is dropped. Misses says what the run asked for that the capture does not hold.
type Replay struct {
	c *api.Capture

	mu     sync.Mutex
	misses []string
}

// NewReplay returns a Replay of c.
func NewReplay(c *api.Capture) *Replay { return &Replay{c: c} }

// Input returns in with the replay as its state, measurer and webhook, and the captured
// console decisions.
func (r *Replay) Input(in Input) Input {
	in.State, in.Measurer, in.Webhook = (*replayState)(r), (*replayMeasurer)(r), (*replayWebhook)(r)
	in.Console = nil
	for _, d := range r.c.Console {
		in.Console = append(in.Console, ConsoleDecision(d))
	}
	return in
}

// Misses are the measurements ("measurement NAME") and the webhook ("webhook") a run asked
// for that the capture does not hold, in the order asked.
func (r *Replay) Misses() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.misses...)
}

func (r *Replay) miss(what string) error {
	r.mu.Lock()
	r.misses = append(r.misses, what)
	r.mu.Unlock()
	return fmt.Errorf("%s: %w", what, ErrNotCaptured)
}

type replayState Replay

func (r *replayState) Gate1Counts(context.Context, Conversation) (Gate1Counts, error) {
	if g := r.c.Gate1; g != nil {
		return Gate1Counts(*g), nil
	}
	return Gate1Counts{}, nil
}

func (r *replayState) SetGate1Counts(context.Context, Conversation, Gate1Counts) error { return nil }

func (r *replayState) SlotAsks(_ context.Context, _ Conversation, actionKey, slotID string) (int, error) {
	for _, a := range r.c.Asks {
		if a.ActionKey == actionKey && a.SlotID == slotID {
			return a.Asks, nil
		}
	}
	return 0, nil
}

func (r *replayState) SetSlotAsks(context.Context, Conversation, string, string, int) error {
	return nil
}

func (r *replayState) ResetConversation(context.Context, Conversation) error { return nil }

func (r *replayState) SaveQuestion(context.Context, string, QuestionBinding) error { return nil }

func (r *replayState) Question(_ context.Context, id string) (QuestionBinding, bool, error) {
	for _, q := range r.c.Questions {
		if q.QuestionID == id && q.Found {
			return QuestionBinding{Principal: q.Principal, ActionKey: q.ActionKey, SlotID: q.SlotID, Kind: q.Kind,
				Value: q.Value, Shown: q.Shown, Origin: api.Source(q.Origin), Options: q.Options}, true, nil
		}
	}
	return QuestionBinding{}, false, nil
}

func (r *replayState) PriorValue(_ context.Context, actionKey, field string) (any, bool, error) {
	for _, p := range r.c.Prior {
		if p.ActionKey == actionKey && p.Field == field {
			return p.Value, p.Found, nil
		}
	}
	return nil, false, nil
}

type replayMeasurer Replay

func (r *replayMeasurer) Measure(_ context.Context, m *policy.Measurement, _ map[string]any) (any, error) {
	res, ok := r.c.Measured[m.Name]
	switch {
	case !ok:
		return nil, (*Replay)(r).miss("measurement " + m.Name)
	case res.Error != "":
		return nil, errors.New(res.Error)
	}
	return res.Value, nil
}

type replayWebhook Replay

func (r *replayWebhook) Approve(context.Context, ApprovalRequest) (Approval, error) {
	w := r.c.Webhook
	switch {
	case w == nil:
		return Approval{}, (*Replay)(r).miss("webhook")
	case w.Error != "":
		return Approval{}, errors.New(w.Error)
	}
	return Approval{Approved: w.Approved, Reason: w.Reason}, nil
}
