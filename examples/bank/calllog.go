package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CallLog appends one JSON line per tools/call as it arrives, before the
// tool runs, so a reader can tell exactly how many calls reached the
// server and with which bytes, even if the tool then hangs or the process
// is killed.
type CallLog struct {
	mu sync.Mutex
	f  *os.File
}

// LogEntry is one line of the call log.
type LogEntry struct {
	Time string `json:"time"`
	PID  int    `json:"pid"`
	Tool string `json:"tool"`
	// Arguments holds the raw argument bytes as received, as a JSON
	// string; ArgumentsBase64 holds the same bytes losslessly (a JSON
	// string cannot carry invalid UTF-8).
	Arguments       string `json:"arguments"`
	ArgumentsBase64 string `json:"arguments_base64"`
	// Traceparent is the W3C trace context the call carried in _meta, if any.
	Traceparent string `json:"traceparent,omitempty"`
	// InputResponses are the answers a retried call carried to the
	// questions of its input_required result, if any.
	InputResponses json.RawMessage `json:"input_responses,omitempty"`
	// Actor is the signed-in user the call came from (its access token's
	// sub), if the bank has sign-in (--auth-issuer).
	Actor string `json:"actor,omitempty"`
}

// OpenCallLog opens path for appending.
func OpenCallLog(path string) (*CallLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &CallLog{f: f}, nil
}

// Close closes the log file.
func (l *CallLog) Close() error { return l.f.Close() }

func (l *CallLog) write(tool string, args []byte, traceparent, actor string, answers mcp.InputResponseMap) error {
	e := LogEntry{
		Time:            time.Now().UTC().Format(time.RFC3339Nano),
		PID:             os.Getpid(),
		Tool:            tool,
		Arguments:       string(args),
		ArgumentsBase64: base64.StdEncoding.EncodeToString(args),
		Traceparent:     traceparent,
		Actor:           actor,
	}
	if len(answers) > 0 {
		var err error
		if e.InputResponses, err = json.Marshal(answers); err != nil {
			return err
		}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = l.f.Write(append(b, '\n')) // one write per line: O_APPEND keeps lines whole
	return err
}

// Middleware records every tools/call, including calls to unknown tools.
func (l *CallLog) Middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/call" {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
				tp, _ := p.Meta["traceparent"].(string)
				var actor string
				if x := req.GetExtra(); x != nil && x.TokenInfo != nil {
					actor = x.TokenInfo.UserID
				}
				if err := l.write(p.Name, p.Arguments, tp, actor, p.InputResponses); err != nil {
					// A call that cannot be recorded is not run: tests rely on
					// the log being complete.
					return nil, err
				}
			}
		}
		return next(ctx, method, req)
	}
}
