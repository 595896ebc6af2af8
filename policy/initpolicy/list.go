package initpolicy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

// List lists the tools of every server of p as verdictd lists them: a server with tools_from over
// MCP, each listing bounded by timeout (zero: 15s), one whose tools p gives inline from p. Every
// server must list its tools: a policy written without one would hold none of its tools.
func List(ctx context.Context, p *policy.Policy, timeout time.Duration) (map[string][]upstream.Tool, error) {
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	out := inline(p)
	remote := map[string]upstream.Config{}
	for id, s := range p.Servers {
		if s.ToolsFrom != nil {
			remote[id] = upstream.Config{Command: slices.Clone(s.ToolsFrom.Command), URL: s.ToolsFrom.URL}
		}
	}
	if len(remote) == 0 {
		return out, nil
	}
	opts := upstream.CatalogOptions{Timeout: timeout, MaxAge: -1}
	opts.Client.ConnectTimeout = timeout
	cat, err := upstream.NewCatalog(remote, opts)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	_ = cat.Refresh(ctx) // a server that did not list is found below, with why
	failed := map[string]error{}
	for _, st := range cat.Status() {
		if st.Err != nil {
			failed[st.ID] = st.Err
		}
	}
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(remote)) {
		tools, ok := cat.Tools(id)
		if !ok {
			errs = append(errs, &ServerError{Server: id, Err: cmp.Or(failed[id], errors.New("no listing"))})
			continue
		}
		out[id] = tools
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// ServerError is a server whose tools could not be had: it did not list them, or its saved
// answer is missing or unreadable.
type ServerError struct {
	Server string
	Err    error
}

func (e *ServerError) Error() string {
	msg := fmt.Sprintf("server %s: its tools could not be listed: %v", e.Server, e.Err)
	// What a stdio server wrote before it failed usually says why ("None of the specified
	// directories are accessible") where the error only says that the connection closed.
	for line := range strings.Lines(upstream.StderrTail(e.Err)) {
		msg += "\n  " + e.Server + " stderr: " + strings.TrimSuffix(line, "\n")
	}
	return msg
}

func (e *ServerError) Unwrap() error { return e.Err }

// ReadSaved reads the tools of the servers of p from saved tools/list answers in dir: the file
// <server id>.json for every server with tools_from, holding the tools/list result
// ({"tools": [...]}) or the whole JSON-RPC response that carries it. A server whose tools p gives
// inline is read from p. A server with no file, a file that names no server of p, an error
// response, and a result with a nextCursor (one page of several) are errors.
func ReadSaved(dir string, p *policy.Policy) (map[string][]upstream.Tool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("saved tools/list answers: %w", opfile.Explain(err))
	}
	out := inline(p)
	var errs []error
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if s := p.Servers[id]; s == nil || s.ToolsFrom == nil {
			errs = append(errs, fmt.Errorf("%s: no server %q of the policy lists its tools with tools_from", filepath.Join(dir, e.Name()), id))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(p.Servers)) {
		if p.Servers[id].ToolsFrom == nil {
			continue
		}
		tools, err := readAnswer(id, filepath.Join(dir, id+".json"))
		if err != nil {
			errs = append(errs, &ServerError{Server: id, Err: err})
			continue
		}
		out[id] = tools
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// readAnswer reads one saved tools/list answer.
func readAnswer(server, path string) ([]upstream.Tool, error) {
	data, err := opfile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: not a tools/list answer: %w", path, err)
	}
	if _, ok := doc["jsonrpc"]; ok {
		if e, ok := doc["error"]; ok {
			return nil, fmt.Errorf("%s: the server answered an error: %s", path, compact(e))
		}
		result, ok := doc["result"]
		if !ok {
			return nil, fmt.Errorf("%s: a JSON-RPC response with no result", path)
		}
		doc = nil
		if err := json.Unmarshal(result, &doc); err != nil {
			return nil, fmt.Errorf("%s: result: %w", path, err)
		}
	}
	if c, ok := doc["nextCursor"]; ok && !isNull(c) && string(c) != `""` {
		return nil, fmt.Errorf("%s: the answer is one page of several (it has a nextCursor): save every page's tools in one answer", path)
	}
	raw, ok := doc["tools"]
	if !ok {
		return nil, fmt.Errorf("%s: not a tools/list answer: no tools", path)
	}
	var defs []json.RawMessage
	if err := json.Unmarshal(raw, &defs); err != nil {
		return nil, fmt.Errorf("%s: tools: %w", path, err)
	}
	return upstream.ParseTools(server, defs), nil
}

func isNull(raw json.RawMessage) bool { return strings.TrimSpace(string(raw)) == "null" }

// inline returns the tools of the servers p gives inline, read as a listing reads them.
func inline(p *policy.Policy) map[string][]upstream.Tool {
	out := map[string][]upstream.Tool{}
	for id, s := range p.Servers {
		if s.ToolsFrom == nil {
			out[id] = upstream.ParseTools(id, s.Tools)
		}
	}
	return out
}
