// Package upstream owns the MCP client side of the gateway: one
// supervised connection per configured tool server (a stdio child or a
// streamable-HTTP endpoint), tool listings taken from the exact bytes the
// server sent, the tool-definition digest that verdicts bind (docs/api.md
// "tsd"), tool calls whose failures are classified so that a call that
// may have run is never mistaken for one that did not, and a Catalog that
// keeps every server's listing fresh.
//
// The Catalog lists a server again as soon as the server announces
// notifications/tools/list_changed or its connection is re-established,
// and every CatalogOptions.Interval in any case, for servers that never
// announce. Announcements are coalesced per server: one listing in flight
// and one queued, however many arrive. A server's cache time on its
// listings (ttlMs, 2026-07-28) is not honoured: the SDK would answer from
// its cache, with no bytes to digest, so every listing asks the server.
// CatalogOptions.OnChange reports every refresh whose listing differs
// from the one it replaces (a tool added or removed, a definition's bytes
// changed), whatever started it, so that a copy of the listing kept
// elsewhere follows at once; a failed refresh, or one that lists the
// same definitions, reports nothing.
//
// With CatalogOptions.ListAll (the gateway, which passes a server's
// features on as the server gives them) a listing also holds the server's
// resources and resource templates when it declares "resources", and its
// prompts when it declares "prompts"; a server that declares neither is
// not asked for them. Each item is kept as the bytes the server listed
// (Resource.Raw, like Tool.Raw) with the fields a user routes by (a
// resource's uri and name, a template's uriTemplate and name, a prompt's
// name), and every page is followed to the last: a listing of more than
// 1000 pages, or of more than 10000 items of one kind, fails whole rather
// than being served in part. notifications/resources/list_changed and
// notifications/prompts/list_changed start a refresh as
// notifications/tools/list_changed does, and OnChange reports any item's
// change and a change of the capabilities the server declared
// ([Client.Capabilities]): all of a listing is taken on one connection,
// and a failure of any part fails the refresh.
//
// A resource's read, a prompt's get, a completion, a subscription and the
// logging level are passed through on a server's connection
// ([Client.ReadResource], [Client.GetPrompt], [Client.Complete],
// [Client.Subscribe], [Client.Unsubscribe], [Client.SetLoggingLevel]) by
// the one function tool calls are sent by: the caller's context ends them,
// their failures are classified as a call's are, and a result comes back
// as the SDK decoded it with the exact bytes the server sent. The client
// keeps its subscriptions across reconnects, and hands every
// notifications/resources/updated to Options.ResourceUpdated (or
// CatalogOptions.ResourceUpdated, with the server's id) on a goroutine of
// its own, never the one reading the connection.
//
// Every tool call is a [Client.Call] of a ToolCall: the tool, the argument
// bytes and, for the retry of a call answered input_required, the answers
// and the server's state, with what the caller asks of the call. It
// returns the tool result as the SDK decoded it, with structuredContent's
// numbers as float64, and, when the caller asks (ToolCall.Raw: callers
// that must read numbers as written, measurements), the exact bytes of the
// result, captured below the SDK from the response to that call's request
// id on the connection the request went out on; it returns no bytes,
// rather than another call's, when they cannot be bound to the call. A
// call that does not ask does not pay for the capture.
//
// Over streamable HTTP a call returns once the event stream its response
// came on has ended, so that the connection goes back to the pool for the
// next call rather than being closed under the call's cancelled context
// (see streamend.go); a server that keeps the stream open holds the call
// until its context ends.
//
// A call given the tool's listed definition (ToolCall.Definition) is made
// without the SDK's client where what the SDK would send and do is known
// exactly (see passcall.go, and call.go, where the choice is made): a
// server that speaks 2026-07-28 without a session, a tool that binds no
// argument to an HTTP header, a first call asking for no result bytes,
// with no trace context to pass on. The request copies the headers and
// _meta of the SDK's own last tools/list on the connection (protocol
// version, configured headers, the client's capabilities), the answer is
// read in one pass and the result decoded by the SDK's own type, so
// results and failure kinds are those of a call through the SDK; any other
// call goes through the SDK. A request the server sends on the call's
// stream, which those revisions have no place for, ends the call with
// ErrOutcomeUnknown. The gateway's pass-through and the executor call
// tools this way.
//
// Closing a Client ends the requests in flight on it at once, on stdio
// and streamable HTTP alike; a tool call ended that way reports
// ErrOutcomeUnknown, since the server may already have run it.
//
// The client never acts for a user: it advertises no roots capability,
// and no elicitation or sampling unless it relays them
// (Options.RelayQuestions, Options.RelaySampling), and answers no question,
// sampling request or input_required result itself. What a server asks,
// reports (progress) and logs during a pass-through call is passed on as
// the call's *Relay says, to that call alone (relay.go). It never retries
// a tool call.
package upstream

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config says how to reach one MCP server. Exactly one of Command and URL
// is set. It mirrors a `servers:` entry of the executor config and a
// `tools_from:` entry of the policy.
type Config struct {
	// Command is the argv of a server spoken to over stdio.
	Command []string `json:"command,omitempty"`
	// Env adds variables to the child's environment (stdio only). The
	// child does not inherit the parent's environment beyond a few
	// neutral variables (PATH, HOME, ...), so the gateway's own secrets
	// never leak into a tool server.
	Env map[string]string `json:"env,omitempty"`
	// URL is the endpoint of a streamable-HTTP server.
	URL string `json:"url,omitempty"`
	// Headers are sent with every HTTP request (URL only), typically
	// Authorization.
	Headers map[string]string `json:"headers,omitempty"`
}

// reservedHeaders are set by the MCP transport itself; a configured value
// would corrupt the protocol.
var reservedHeaders = []string{"Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id", "Content-Length", "Host"}

// Validate reports whether c names exactly one usable transport.
func (c Config) Validate() error {
	switch {
	case len(c.Command) > 0 && c.URL != "":
		return errors.New("both command and url are set")
	case len(c.Command) == 0 && c.URL == "":
		return errors.New("neither command nor url is set")
	case len(c.Command) > 0:
		if c.Command[0] == "" {
			return errors.New("command: empty program name")
		}
		if len(c.Headers) > 0 {
			return errors.New("headers: only for url servers")
		}
		return nil
	}
	if len(c.Env) > 0 {
		return errors.New("env: only for command servers")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url: want an absolute http or https URL")
	}
	for name := range c.Headers {
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if slices.ContainsFunc(reservedHeaders, func(r string) bool { return canon == textproto.CanonicalMIMEHeaderKey(r) }) {
			return fmt.Errorf("headers: %s is set by the MCP transport", canon)
		}
	}
	return nil
}

// Options tune a Client. The zero value is usable.
type Options struct {
	// Logger receives connection events, failures to start, initialize
	// or list a server (at error level, with the tail of a stdio server's
	// standard error in a "stderr" attribute), and every line a stdio
	// server writes to its standard error (at info level, with a "server"
	// attribute): a daemon's own stderr stays one JSON record per line.
	// Nil discards them; the tail is still attached to the errors.
	Logger *slog.Logger
	// Implementation is the client name and version sent to servers.
	// Nil sends "verdict-upstream".
	Implementation *mcp.Implementation
	// HTTPClient is the base client for URL servers. Nil uses a client
	// with http.DefaultTransport. Its Timeout must be zero: responses are
	// streams, and calls are bounded by their context instead.
	HTTPClient *http.Client
	// ConnectTimeout bounds one connection attempt (process start and
	// protocol negotiation). Zero means 10s.
	ConnectTimeout time.Duration
	// RestartDelay is the first pause before reconnecting after a
	// connection ends; it doubles with every failed attempt up to
	// MaxRestartDelay. Zeros mean 100ms and 30s.
	RestartDelay    time.Duration
	MaxRestartDelay time.Duration
	// ToolListChanged, if set, is called when the server announces that
	// its tool list changed (notifications/tools/list_changed), and after
	// every reconnect, since the new connection may list other tools and
	// an announcement made while disconnected is lost. It runs on the
	// client's own goroutines (the one reading the connection, the one
	// reconnecting) and must return at once. When it is set, the client
	// subscribes to the announcements.
	ToolListChanged func()
	// ResourceListChanged and PromptListChanged are ToolListChanged for
	// notifications/resources/list_changed (resources and resource
	// templates) and notifications/prompts/list_changed: called on the
	// announcement and after every reconnect, on the client's own
	// goroutines, and must return at once.
	ResourceListChanged func()
	PromptListChanged   func()
	// ResourceUpdated, if set, is called with the URI of every
	// notifications/resources/updated the server sends (see
	// Client.Subscribe), and of every subscription renewed after a
	// reconnect. It runs on a goroutine of the client's own, never the one
	// reading the connection, one call at a time in the order the
	// notifications came; a URI already waiting for the hook is not queued
	// twice. It must not close the client. Once Close returns it is not
	// called again.
	ResourceUpdated func(uri string)
	// RelayQuestions declares form elicitation to the server, so that a
	// server of a revision before 2026-07-28 may send elicitation/create
	// during a call. Such a question is put to the Asker of the call's
	// Relay when it can be tied to that call: exactly one call is in
	// flight on the connection, and its Relay has an Asker. Any other
	// question is refused with a JSON-RPC error. Without it the client
	// declares no elicitation, and a server cannot ask at all. The
	// executor never sets it: a gated call's server may not ask the user
	// on the gate's behalf.
	RelayQuestions bool
	// RelaySampling is RelayQuestions for sampling/createMessage: the
	// client declares sampling, and a server's sampling request goes to
	// the Sampler of the one call in flight, or is refused. The executor
	// never sets it either.
	RelaySampling bool
	// Roots, when not nil (empty included), declares roots to the server
	// and is the list the client answers its roots/list with, until
	// [Client.SetRoots] gives another. Roots are one user's (the
	// directories and files a host lets servers see), so only a
	// connection made for one host session has them; a connection shared
	// by every user declares none. Deprecated by MCP from 2026-07-28 on.
	Roots []*mcp.Root
}

func (o Options) logger() *slog.Logger {
	return cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
}

func (o Options) connectTimeout() time.Duration {
	if o.ConnectTimeout <= 0 {
		return 10 * time.Second
	}
	return o.ConnectTimeout
}

func (o Options) restartDelays() (first, max time.Duration) {
	first, max = o.RestartDelay, o.MaxRestartDelay
	if first <= 0 {
		first = 100 * time.Millisecond
	}
	if max <= 0 {
		max = 30 * time.Second
	}
	if max < first {
		max = first
	}
	return first, max
}
