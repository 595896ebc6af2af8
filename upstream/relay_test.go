package upstream

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestQuestionIsRelayedOnlyToItsOneCall: an elicitation/create names no
// call, so it is put to a call's Asker only when that call is the one call
// in flight on the connection; with no call, two calls, or a call without
// an Asker (the executor's, for one), it is refused and nobody is asked.
func TestQuestionIsRelayedOnlyToItsOneCall(t *testing.T) {
	asked := 0
	ask := Asker(func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		asked++
		return &mcp.ElicitResult{Action: "decline"}, nil
	})
	q := &mcp.ElicitRequest{Params: &mcp.ElicitParams{Message: "Which color?"}}
	for _, tc := range []struct {
		name    string
		calls   []Asker
		relayed bool
	}{
		{"no call in flight", nil, false},
		{"one call without an asker", []Asker{nil}, false},
		{"one call with an asker", []Asker{ask}, true},
		{"two calls, both with askers", []Asker{ask, ask}, false},
		{"two calls, one with an asker", []Asker{ask, nil}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{log: slog.New(slog.DiscardHandler)}
			var done []func()
			for _, a := range tc.calls {
				done = append(done, c.track(a))
			}
			before := asked
			res, err := c.relayQuestion(t.Context(), q)
			for _, d := range done {
				d()
			}
			if tc.relayed {
				if err != nil || res.Action != "decline" || asked != before+1 {
					t.Fatalf("not relayed: %v %v", res, err)
				}
				return
			}
			if !errors.Is(err, ErrQuestionRefused) || asked != before {
				t.Fatalf("relayed: %v %v", res, err)
			}
		})
	}
}
