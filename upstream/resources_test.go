package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resourceServerMode, as the value of helperServerEnv, makes the test
// binary run a resServer over stdio.
const resourceServerMode = "resources"

// bigNumber is a number a float64 cannot hold: the SDK's decoding of an
// item's _meta rounds it, so finding it in an item's bytes shows they are
// the server's own.
const bigNumber = "9007199254740993"

// resPageSize is the server's page size: every listing of a resServer
// takes more than one page.
const resPageSize = 2

// resServer is a real go-sdk MCP server with resources (r0..r4 and
// "slow", whose read waits until it is cancelled, counted as a request of
// "cancelled", or the server stops), resource templates
// (t0..t2), prompts (p0..p2), completion and subscriptions, listed
// resPageSize to a page. Every item, read and prompt carries bigNumber in
// its _meta. Its tools change it from the client's side, which works over
// every transport alike:
//
//   - add_resource {"uri","name"} and add_prompt {"name"} add an item; the
//     SDK announces it with notifications/resources/list_changed or
//     notifications/prompts/list_changed;
//   - touch {"uri"} sends notifications/resources/updated for uri to its
//     subscribers;
//   - asked answers {"<method>": requests received, ...};
//   - subscribed answers {"<uri>": subscriptions held, ...};
//   - pid answers the server's process id.
type resServer struct {
	srv *mcp.Server

	stop chan struct{} // closed when the test ends

	mu         sync.Mutex
	asked      map[string]int
	subscribed map[string]int
}

func bigMeta() mcp.Meta { return mcp.Meta{"n": json.RawMessage(bigNumber)} }

func newResServer() *resServer {
	s := &resServer{stop: make(chan struct{}), asked: map[string]int{}, subscribed: map[string]int{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "resources", Version: "1"}, &mcp.ServerOptions{
		PageSize: resPageSize,
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			var values []string
			for _, v := range []string{"alpha", "alpine", "beta"} {
				if strings.HasPrefix(v, req.Params.Argument.Value) {
					values = append(values, v)
				}
			}
			return &mcp.CompleteResult{Meta: bigMeta(), Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
		},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.subscribed[req.Params.URI]++
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.subscribed[req.Params.URI]--
			return nil
		},
	})
	s.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			s.mu.Lock()
			s.asked[method]++
			s.mu.Unlock()
			return next(ctx, method, req)
		}
	})
	for i := range 5 {
		s.addResource(fmt.Sprintf("res://r%d", i), fmt.Sprintf("r%d", i))
	}
	s.srv.AddResource(&mcp.Resource{URI: "res://slow", Name: "slow", Meta: bigMeta()},
		func(ctx context.Context, _ *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			select {
			case <-ctx.Done():
				s.mu.Lock()
				s.asked["cancelled"]++
				s.mu.Unlock()
				return nil, ctx.Err()
			case <-s.stop:
				return nil, errors.New("server stopped")
			}
		})
	for i := range 3 {
		s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: fmt.Sprintf("res://t%d/{id}", i), Name: fmt.Sprintf("t%d", i), Meta: bigMeta()},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "templated"}}}, nil
			})
		s.addPrompt(fmt.Sprintf("p%d", i))
	}
	tool := func(name string, h func(args map[string]string) (any, error)) {
		s.srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var args map[string]string
				if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
					return nil, err
				}
				out, err := h(args)
				if err != nil {
					return nil, err
				}
				b, err := json.Marshal(out)
				if err != nil {
					return nil, err
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
			})
	}
	tool("add_resource", func(a map[string]string) (any, error) { s.addResource(a["uri"], a["name"]); return "ok", nil })
	tool("add_prompt", func(a map[string]string) (any, error) { s.addPrompt(a["name"]); return "ok", nil })
	tool("touch", func(a map[string]string) (any, error) {
		return "ok", s.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: a["uri"]})
	})
	// A copy: the map is encoded after the lock is released, while other requests count on.
	tool("asked", func(map[string]string) (any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return maps.Clone(s.asked), nil
	})
	tool("subscribed", func(map[string]string) (any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return maps.Clone(s.subscribed), nil
	})
	tool("pid", func(map[string]string) (any, error) { return os.Getpid(), nil })
	return s
}

func (s *resServer) addResource(uri, name string) {
	s.srv.AddResource(&mcp.Resource{URI: uri, Name: name, MIMEType: "text/plain", Meta: bigMeta()},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Meta: bigMeta(),
				Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "contents of " + name}}}, nil
		})
}

func (s *resServer) addPrompt(name string) {
	s.srv.AddPrompt(&mcp.Prompt{Name: name, Meta: bigMeta(), Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Meta: bigMeta(), Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: name + " for " + req.Params.Arguments["who"]}}}}, nil
		})
}

func runResServer() int {
	if err := newResServer().srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "resources server:", err)
		return 1
	}
	return 0
}

// resTransports runs f against a resServer over stdio and over
// streamable HTTP, stateful and stateless (the 2026-07-28 revision).
func resTransports(t *testing.T, f func(t *testing.T, cfg Config)) {
	serve := func(stateless bool) func(t *testing.T) Config {
		return func(t *testing.T) Config { return newResServer().serve(t, stateless) }
	}
	for _, tr := range []struct {
		name string
		cfg  func(t *testing.T) Config
	}{
		{"stdio", func(t *testing.T) Config {
			cfg := helperConfig(t)
			cfg.Env = map[string]string{helperServerEnv: resourceServerMode}
			return cfg
		}},
		{"http-stateful", serve(false)},
		{"http-stateless", serve(true)},
	} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			f(t, tr.cfg(t))
		})
	}
}

// serve serves s over streamable HTTP in this process until the test ends.
func (s *resServer) serve(t testing.TB, stateless bool) Config {
	cfg := serveMCP(t, s.srv, &mcp.StreamableHTTPOptions{Stateless: stateless})
	// Before the server closes, which waits for its handlers.
	t.Cleanup(func() { close(s.stop) })
	return cfg
}

// serveMCP serves srv over streamable HTTP in this process.
func serveMCP(t testing.TB, srv *mcp.Server, opts *mcp.StreamableHTTPOptions) Config {
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts))
	t.Cleanup(hs.Close)
	return Config{URL: hs.URL}
}

// tell calls one of a resServer's tools and decodes its answer into out.
func tell(t *testing.T, c *Client, tool string, args map[string]string, out any) {
	t.Helper()
	b := []byte("{}")
	if args != nil {
		b, _ = json.Marshal(args)
	}
	res, err := callTool(testContext(t), c, tool, b)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(resultText(t, res)), out); err != nil {
			t.Fatal(err)
		}
	}
}

func asked(t *testing.T, c *Client) map[string]int {
	t.Helper()
	var m map[string]int
	tell(t, c, "asked", nil, &m)
	return m
}

func subscribedTo(t *testing.T, c *Client, uri string) int {
	t.Helper()
	var m map[string]int
	tell(t, c, "subscribed", nil, &m)
	return m[uri]
}

func names[T any](items []T, name func(T) string) []string {
	var out []string
	for _, it := range items {
		out = append(out, name(it))
	}
	slices.Sort(out)
	return out
}

// TestCatalogListsResourcesAndPrompts: with ListAll, the catalog lists a
// real server's resources, templates and prompts page by page to the end,
// keeps every item's bytes as sent, and serves the capabilities of the
// connection it listed on.
func TestCatalogListsResourcesAndPrompts(t *testing.T) {
	resTransports(t, func(t *testing.T, cfg Config) {
		c := newCatalog(t, map[string]Config{"res": cfg}, CatalogOptions{ListAll: true, Interval: 24 * time.Hour})
		if err := c.RefreshServer(testContext(t), "res"); err != nil {
			t.Fatal(err)
		}
		rs, ok := c.Resources("res")
		if got := names(rs, func(r Resource) string { return r.URI + " " + r.Name }); !ok || !slices.Equal(got, []string{
			"res://r0 r0", "res://r1 r1", "res://r2 r2", "res://r3 r3", "res://r4 r4", "res://slow slow"}) {
			t.Fatalf("resources %v, %v", got, ok)
		}
		ts, _ := c.ResourceTemplates("res")
		if got := names(ts, func(r ResourceTemplate) string { return r.URITemplate + " " + r.Name }); !slices.Equal(got, []string{
			"res://t0/{id} t0", "res://t1/{id} t1", "res://t2/{id} t2"}) {
			t.Fatalf("templates %v", got)
		}
		ps, _ := c.Prompts("res")
		if got := names(ps, func(p Prompt) string { return p.Name }); !slices.Equal(got, []string{"p0", "p1", "p2"}) {
			t.Fatalf("prompts %v", got)
		}
		raws := map[string]json.RawMessage{}
		for _, r := range rs {
			raws[r.URI] = r.Raw
		}
		for _, r := range ts {
			raws[r.URITemplate] = r.Raw
		}
		for _, p := range ps {
			raws[p.Name] = p.Raw
		}
		for key, raw := range raws {
			if !strings.Contains(string(raw), `"n":`+bigNumber) {
				t.Errorf("%s: bytes %s are not as the server sent them", key, raw)
			}
		}
		for _, r := range rs {
			if r.Server != "res" || r.Err != nil {
				t.Errorf("%s: server %q, err %v", r.URI, r.Server, r.Err)
			}
		}
		st := status(t, c, "res")
		if st.Resources != 6 || st.ResourceTemplates != 3 || st.Prompts != 3 || st.Err != nil {
			t.Errorf("status %+v", st)
		}
		caps, ok := catalogCaps(t, c, "res")
		if want := (Capabilities{ProtocolVersion: caps.ProtocolVersion, Tools: true, ToolsListChanged: true, Resources: true, ResourcesSubscribe: true,
			ResourcesListChanged: true, Prompts: true, PromptsListChanged: true, Completions: true, Logging: true}); !ok || caps != want {
			t.Errorf("capabilities %+v, want %+v", caps, want)
		}
		cl, err := c.Client(testContext(t), "res")
		if err != nil {
			t.Fatal(err)
		}
		// Every page was asked for: six resources at two a page are three.
		n := asked(t, cl)
		for m, want := range map[string]int{methodListResources: 3, methodListResourceTemplates: 2, methodListPrompts: 2} {
			if n[m] != want {
				t.Errorf("%s asked %d times, want %d", m, n[m], want)
			}
		}
	})
}

// TestCatalogFollowsResourceAndPromptListChanged: an item added at the
// server is served once the server announces it, with OnChange called,
// without a reconnect or an interval.
func TestCatalogFollowsResourceAndPromptListChanged(t *testing.T) {
	resTransports(t, func(t *testing.T, cfg Config) {
		var changes atomic.Int64
		c := newCatalog(t, map[string]Config{"res": cfg}, CatalogOptions{ListAll: true, Interval: 24 * time.Hour,
			OnChange: func(string) { changes.Add(1) }})
		ctx := testContext(t)
		if err := c.RefreshServer(ctx, "res"); err != nil {
			t.Fatal(err)
		}
		cl, err := c.Client(ctx, "res")
		if err != nil {
			t.Fatal(err)
		}
		cn := current(cl)
		before := changes.Load()
		tell(t, cl, "add_resource", map[string]string{"uri": "res://new", "name": "new"}, nil)
		waitFor(t, "the new resource is served", func() bool {
			rs, _ := c.Resources("res")
			return slices.ContainsFunc(rs, func(r Resource) bool { return r.URI == "res://new" && r.Name == "new" })
		})
		tell(t, cl, "add_prompt", map[string]string{"name": "fresh"}, nil)
		waitFor(t, "the new prompt is served", func() bool {
			ps, _ := c.Prompts("res")
			return slices.ContainsFunc(ps, func(p Prompt) bool { return p.Name == "fresh" })
		})
		// The catalog serves a listing before it reports it to OnChange.
		waitFor(t, "OnChange is called for both changes", func() bool { return changes.Load() >= before+2 })
		if current(cl) != cn {
			t.Error("the connection was replaced: the change did not come by announcement")
		}
	})
}

// TestPassThroughRequests: a read, a prompt and a completion come back as
// the SDK decodes them and as the server sent them; a refusal is
// ErrRejected, a read cut short ErrOutcomeUnknown.
func TestPassThroughRequests(t *testing.T) {
	resTransports(t, func(t *testing.T, cfg Config) {
		cl, err := Dial(testContext(t), "res", cfg, testOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		ctx := testContext(t)

		rr, raw, err := cl.ReadResource(ctx, "res://r1")
		if err != nil {
			t.Fatal(err)
		}
		if len(rr.Contents) != 1 || rr.Contents[0].Text != "contents of r1" || rr.Contents[0].URI != "res://r1" {
			t.Errorf("read %+v", rr.Contents)
		}
		if !strings.Contains(string(raw), `"n":`+bigNumber) || !strings.Contains(string(raw), `"contents of r1"`) {
			t.Errorf("read bytes %s", raw)
		}
		rr, _, err = cl.ReadResource(ctx, "res://t1/x")
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "templated" {
			t.Errorf("templated read %+v, %v", rr, err)
		}

		pr, raw, err := cl.GetPrompt(ctx, "p1", map[string]string{"who": "ann"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pr.Messages) != 1 || pr.Messages[0].Content.(*mcp.TextContent).Text != "p1 for ann" {
			t.Errorf("prompt %+v", pr.Messages)
		}
		if !strings.Contains(string(raw), `"n":`+bigNumber) {
			t.Errorf("prompt bytes %s", raw)
		}

		params := &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "p1"},
			Argument: mcp.CompleteParamsArgument{Name: "who", Value: "al"}}
		cr, raw, err := cl.Complete(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cr.Completion.Values, []string{"alpha", "alpine"}) || !strings.Contains(string(raw), `"n":`+bigNumber) {
			t.Errorf("completion %+v, bytes %s", cr.Completion, raw)
		}
		if params.Meta != nil {
			t.Error("Complete modified the caller's params")
		}

		caps, _ := cl.Capabilities()
		if err := cl.SetLoggingLevel(ctx, "debug"); caps.ProtocolVersion < plainRevision && err != nil {
			t.Fatal(err)
		} else if caps.ProtocolVersion >= plainRevision && !errors.Is(err, ErrRejected) {
			// Not in that revision: refused without being sent.
			t.Fatalf("logging/setLevel in %s: %v", caps.ProtocolVersion, err)
		}

		_, raw, err = cl.ReadResource(ctx, "res://none")
		var ce *CallError
		if !errors.Is(err, ErrRejected) || raw != nil || !errors.As(err, &ce) || ce.Method != methodReadResource || ce.Tool != "res://none" {
			t.Errorf("unknown resource: %v, %s", err, raw)
		}
		if _, _, err := cl.GetPrompt(ctx, "none", nil); !errors.Is(err, ErrRejected) {
			t.Errorf("unknown prompt: %v", err)
		}

		// The caller's cancellation ends the read, and reaches the
		// server's handler where the transport carries it: a stateless
		// server's handler does not learn of it.
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, _, err := cl.ReadResource(short, "res://slow"); !errors.Is(err, ErrOutcomeUnknown) {
			t.Errorf("read cut short: %v", err)
		}
		if caps.ProtocolVersion < plainRevision || cfg.URL == "" {
			waitFor(t, "the server's read is cancelled", func() bool { return asked(t, cl)["cancelled"] == 1 })
		}

		n := asked(t, cl)
		for _, m := range []string{methodReadResource, methodGetPrompt, methodComplete} {
			if n[m] == 0 {
				t.Errorf("%s never reached the server", m)
			}
		}
		if sent := n[methodSetLevel] > 0; sent != (caps.ProtocolVersion < plainRevision) {
			t.Errorf("%s sent: %v in revision %s", methodSetLevel, sent, caps.ProtocolVersion)
		}
	})
}

// updateLog records the updates a hook is told of.
type updateLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *updateLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, s)
}

func (l *updateLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.seen, s)
}

// TestCatalogDeliversResourceUpdated: once subscribed, the server's
// notifications/resources/updated reach CatalogOptions.ResourceUpdated
// with the server's id.
func TestCatalogDeliversResourceUpdated(t *testing.T) {
	resTransports(t, func(t *testing.T, cfg Config) {
		log := &updateLog{}
		c := newCatalog(t, map[string]Config{"res": cfg}, CatalogOptions{ListAll: true, Interval: 24 * time.Hour,
			ResourceUpdated: func(server, uri string) { log.add(server + " " + uri) }})
		ctx := testContext(t)
		cl, err := c.Client(ctx, "res")
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Subscribe(ctx, "res://r2"); err != nil {
			t.Fatal(err)
		}
		// A 2026-07-28 subscription is a stream the SDK opens without
		// waiting for the server.
		waitFor(t, "the server holds the subscription", func() bool { return subscribedTo(t, cl, "res://r2") == 1 })
		tell(t, cl, "touch", map[string]string{"uri": "res://r2"}, nil)
		waitFor(t, "the update is delivered", func() bool { return log.has("res res://r2") })
		if err := cl.Unsubscribe(ctx, "res://r2"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the server drops the subscription", func() bool { return subscribedTo(t, cl, "res://r2") == 0 })
	})
}

// TestResourceUpdatedDoesNotHoldTheConnection: while the hook is busy the
// connection still answers, and updates wait their turn, one per URI.
func TestResourceUpdatedDoesNotHoldTheConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) Config
	}{
		{"stdio", func(t *testing.T) Config {
			cfg := helperConfig(t)
			cfg.Env = map[string]string{helperServerEnv: resourceServerMode}
			return cfg
		}},
		// Stateful: every update comes on one stream, in order.
		{"http-stateful", func(t *testing.T) Config { return newResServer().serve(t, false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			entered, release := make(chan string, 10), make(chan struct{})
			opts := testOptions(t)
			opts.ResourceUpdated = func(uri string) {
				entered <- uri
				<-release
			}
			cl, err := Dial(testContext(t), "res", tc.cfg(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cl.Close() })
			defer close(release)
			ctx := testContext(t)
			for _, uri := range []string{"res://r1", "res://r2"} {
				if err := cl.Subscribe(ctx, uri); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the server holds the subscription", func() bool { return subscribedTo(t, cl, uri) == 1 })
			}
			tell(t, cl, "touch", map[string]string{"uri": "res://r1"}, nil)
			if got := <-entered; got != "res://r1" {
				t.Fatalf("first update %s", got)
			}
			// The hook holds r1; the connection serves on.
			if _, _, err := cl.ReadResource(ctx, "res://r0"); err != nil {
				t.Fatal(err)
			}
			for _, uri := range []string{"res://r1", "res://r1", "res://r2", "res://r1"} {
				tell(t, cl, "touch", map[string]string{"uri": uri}, nil)
			}
			waitFor(t, "the updates wait, one per URI", func() bool {
				cl.updates.mu.Lock()
				defer cl.updates.mu.Unlock()
				return slices.Equal(cl.updates.order, []string{"res://r1", "res://r2"})
			})
			release <- struct{}{}
			if got := <-entered; got != "res://r1" {
				t.Fatalf("second update %s", got)
			}
			release <- struct{}{}
			if got := <-entered; got != "res://r2" {
				t.Fatalf("third update %s", got)
			}
		})
	}
}

// TestSubscriptionRenewedOnReconnect kills a stdio server holding a
// subscription: the client subscribes again on the new process and
// reports the URI updated, since what changed meanwhile was not told.
func TestSubscriptionRenewedOnReconnect(t *testing.T) {
	cfg := helperConfig(t)
	cfg.Env = map[string]string{helperServerEnv: resourceServerMode}
	log := &updateLog{}
	opts := testOptions(t)
	opts.ResourceUpdated = log.add
	cl, err := Dial(testContext(t), "res", cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx := testContext(t)
	if err := cl.Subscribe(ctx, "res://r3"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server holds the subscription", func() bool { return subscribedTo(t, cl, "res://r3") == 1 })
	var pid int
	tell(t, cl, "pid", nil, &pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the renewal is reported", func() bool { return log.has("res://r3") })
	var again int
	tell(t, cl, "pid", nil, &again)
	if again == pid {
		t.Fatal("still the killed process")
	}
	waitFor(t, "the new process holds the subscription", func() bool { return subscribedTo(t, cl, "res://r3") == 1 })
}

// catalogCaps is what the catalog's connection to server declared.
func catalogCaps(t *testing.T, c *Catalog, server string) (Capabilities, bool) {
	t.Helper()
	cl, err := c.Client(testContext(t), server)
	if err != nil {
		t.Fatal(err)
	}
	return cl.Capabilities()
}

// TestCatalogAsksOnlyWhatTheServerDeclares: a server that declares
// neither resources nor prompts lists none and is never asked for them;
// without ListAll, a server that declares them is not asked either.
func TestCatalogAsksOnlyWhatTheServerDeclares(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	bare := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	bare.AddTool(&mcp.Tool{Name: "only", InputSchema: json.RawMessage(`{"type":"object"}`)}, noopTool)
	bare.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			mu.Lock()
			seen[method]++
			mu.Unlock()
			return next(ctx, method, req)
		}
	})
	rich := newResServer()
	richCfg := rich.serve(t, false)
	c := newCatalog(t, map[string]Config{"bare": serveMCP(t, bare, nil)}, CatalogOptions{ListAll: true})
	only := newCatalog(t, map[string]Config{"rich": richCfg}, CatalogOptions{})
	ctx := testContext(t)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := only.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	rs, ok := c.Resources("bare")
	ts, _ := c.ResourceTemplates("bare")
	ps, _ := c.Prompts("bare")
	if !ok || len(rs)+len(ts)+len(ps) != 0 {
		t.Errorf("bare server lists %v %v %v, %v", rs, ts, ps, ok)
	}
	if tools, _ := c.Tools("bare"); len(tools) != 1 {
		t.Errorf("tools %v", tools)
	}
	caps, _ := catalogCaps(t, c, "bare")
	if caps.Resources || caps.Prompts || caps.Completions || !caps.Tools {
		t.Errorf("capabilities %+v", caps)
	}
	if rs, ok := only.Resources("rich"); !ok || len(rs) != 0 {
		t.Errorf("without ListAll: %v, %v", rs, ok)
	}
	mu.Lock()
	defer mu.Unlock()
	rich.mu.Lock()
	defer rich.mu.Unlock()
	for _, m := range []string{methodListResources, methodListResourceTemplates, methodListPrompts} {
		if seen[m] != 0 || rich.asked[m] != 0 {
			t.Errorf("%s asked %d times of a server that does not declare it, %d without ListAll", m, seen[m], rich.asked[m])
		}
	}
	if seen[methodListTools] == 0 {
		t.Error("tools/list never asked")
	}
}

// TestCatalogRefusesAnOverlongListing: a server listing more than maxItems
// resources fails the refresh whole; nothing of it is served.
func TestCatalogRefusesAnOverlongListing(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "flood", Version: "1"}, nil)
	for i := range maxItems + 1 {
		srv.AddResource(&mcp.Resource{URI: "res://" + strconv.Itoa(i), Name: strconv.Itoa(i)}, nil)
	}
	c := newCatalog(t, map[string]Config{"flood": serveMCP(t, srv, nil)}, CatalogOptions{ListAll: true})
	err := c.RefreshServer(testContext(t), "flood")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("resources/list: more than %d items", maxItems)) {
		t.Fatalf("refresh: %v", err)
	}
	if rs, ok := c.Resources("flood"); ok || rs != nil {
		t.Errorf("resources served: %d, %v", len(rs), ok)
	}
	if _, ok := c.Tools("flood"); ok {
		t.Error("the tools of a failed listing are served")
	}
}

// TestParseItem: an item is read only when its bytes have one reading.
func TestParseItem(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want []string
		err  string
	}{
		{`{"uri":"a://b","name":"b","_meta":{"n":` + bigNumber + `}}`, []string{"a://b", "b"}, ""},
		{`{"uri":"a://b","name":"b","uri":"a://c"}`, []string{"a://c", "b"}, "duplicate"},
		{`{"uri":"a://b","name":"b","x":{"k":1,"k":2}}`, []string{"a://b", "b"}, "duplicate"},
		{"{\"uri\":\"a://b\",\"name\":\"\xff\"}", []string{"a://b", "\ufffd"}, "UTF-8"},
		{`{"uri":"a://b"}`, []string{"a://b", ""}, "name must be a non-empty string"},
		{`{"uri":1,"name":"b"}`, []string{"", "b"}, "uri must be a non-empty string"},
		{`[1]`, []string{"", ""}, "listed item"},
	} {
		got, err := parseItem(json.RawMessage(tc.raw), "uri", "name")
		if !slices.Equal(got, tc.want) || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %q, %v; want %q, %q", tc.raw, got, err, tc.want, tc.err)
		}
	}
}
