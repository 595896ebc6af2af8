package upstream

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An Asker puts a server's question (a form elicitation) to whoever a
// call is made for, and returns their answer, decline and cancel
// included. The client never answers a question itself.
type Asker func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)

type askerKey struct{}

// WithAsker returns a context under which a Call on a client dialed with
// Options.RelayQuestions puts the server's elicitation/create requests to
// ask. A Call without one refuses them.
func WithAsker(ctx context.Context, ask Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, ask)
}

func askerOf(ctx context.Context) Asker {
	a, _ := ctx.Value(askerKey{}).(Asker)
	return a
}

// inflightCall is one call in flight on the client, with the context it
// was made under.
type inflightCall struct {
	ask Asker
}

// track records a call in flight until the returned func is called.
func (c *Client) track(ask Asker) func() {
	ic := &inflightCall{ask: ask}
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[*inflightCall]struct{}{}
	}
	c.calls[ic] = struct{}{}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.calls, ic)
		c.mu.Unlock()
	}
}

// ErrQuestionRefused is the answer to a server's question that the
// client cannot tie to exactly one call with an Asker.
var ErrQuestionRefused = errors.New("question refused: it cannot be tied to one call that may relay it")

// relayQuestion is the client's elicitation/create handler. An
// elicitation/create names no call: over one connection shared by several
// calls, a question could come from any of them, and relaying it to the
// wrong call's user would show one user another's question and send back
// an answer they never gave for it. So a question is relayed only when
// exactly one call is in flight on the client and that call has an Asker;
// anything else is refused.
func (c *Client) relayQuestion(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	c.mu.Lock()
	var ask Asker
	if len(c.calls) == 1 {
		for ic := range c.calls {
			ask = ic.ask
		}
	}
	c.mu.Unlock()
	if ask == nil || req == nil || req.Params == nil {
		c.log.Warn("upstream question refused: not tied to exactly one call that relays questions")
		return nil, ErrQuestionRefused
	}
	return ask(ctx, req.Params)
}

// Continue sends the retry of a call the server answered input_required
// (a 2026-07-28 server): the same tool and argument bytes, the answers by
// input request id, and the server's requestState as it sent it. Results
// and errors are those of Call; the server may ask again
// (ErrInputRequired).
func (c *Client) Continue(ctx context.Context, tool string, args json.RawMessage, answers mcp.InputResponseMap, state string) (*mcp.CallToolResult, error) {
	res, _, err := c.call(ctx, tool, args, answers, state, false)
	return res, err
}
