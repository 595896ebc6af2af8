// Command bank is a small MCP server holding a demo bank ledger in a JSON
// file. It offers transfer and schedule_transfer (irreversible),
// get_balance and list_transactions (reads), over stdio (the default) or
// streamable HTTP.
//
// Usage:
//
//	bank [--state FILE] [--log FILE] [--http ADDR] [test knobs]
//
// With --http, the server listens on ADDR (port 0 picks a free port) and
// prints "bank: listening on http://HOST:PORT/mcp" on stderr once it
// accepts connections. The endpoint is /mcp.
//
// Test knobs: --delay D makes transfer wait D before acting; --hang makes
// transfer never answer; --input-required makes transfer answer
// input_required; --schema-variant N publishes a different transfer
// definition (1: description, 2: schema, 3: draft-07 $schema, 4: a number
// no double denotes exactly); --no-verify publishes transfer without its
// [Verify] label (a provider that asks no approval of its own, so that only
// the policy asks one); --hide NAMES leaves tools out of the listing;
// --json-response answers HTTP calls with application/json rather than an
// event stream; --ask FILE makes get_balance first ask the user the form
// elicitation FILE holds at the time of the call (a JSON object with
// message and requestedSchema), with input_required to a 2026-07-28
// client and elicitation/create to an older one, and put what it was told
// before the balance (a server that asks whatever it likes, for testing
// what a gateway relays).
//
// Over HTTP the server is stateless (protocol revision 2026-07-28, which
// the SDK serves only statelessly; older clients get a temporary session
// per request). --stateful keeps sessions instead, which limits clients to
// the older revisions.
//
// Sign-in (HTTP only; refused with stdio): with --auth-issuer ISSUER the
// server is an OAuth protected resource that serves a call only with an
// access token of its own user, as a real bank's API would:
//
//	bank --http ADDR --auth-issuer ISSUER [--resource URI] [--scope SCOPE]...
//	     [--owner SUB=ACCOUNT]...
//
// ISSUER is the authorization server whose JWT access tokens it accepts,
// verified against the keys its OpenID discovery document names (https, or
// http on a loopback host). --resource is the server's resource identifier,
// which a token's aud must name (default: its own /mcp URL, which a
// listener on all addresses does not have, so there it is required). Each
// --scope is a scope every token must grant. Each --owner makes the user
// whose token's sub is SUB the owner of ledger account ACCOUNT; an account
// has one owner, and must be in the ledger.
//
// The server then publishes its protected resource metadata (RFC 9728) at
// /.well-known/oauth-protected-resource/mcp and
// /.well-known/oauth-protected-resource: the resource, the issuer as its
// one authorization server, the scopes, and "header" as the one way to send
// a token. A request to /mcp without a token is answered 401 with
// WWW-Authenticate: Bearer resource_metadata="<the metadata's URL>"; one
// whose token does not verify (signature, issuer, an aud without the
// resource, expired, no sub) 401 with error="invalid_token" as well, and one
// whose token lacks a --scope 403 with error="insufficient_scope".
//
// The token's sub is the call's actor: every ledger transaction and
// call-log line names it. transfer and schedule_transfer move money only
// from the actor's own accounts, and get_balance and list_transactions show
// only those accounts and the transactions that touch them, with no actor
// but the caller's own named; any other account is refused with a tool
// error that says nothing of it. Without --auth-issuer there is no actor,
// and every call may use every account.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "bank:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bank", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		statePath = fs.String("state", "bank-state.json", "ledger `file` (created with demo accounts if missing)")
		logPath   = fs.String("log", "", "append one JSON line per tools/call to `file`")
		httpAddr  = fs.String("http", "", "serve streamable HTTP on `addr` instead of stdio")
		k         knobs
	)
	fs.DurationVar(&k.delay, "delay", 0, "transfer waits `duration` before acting")
	fs.BoolVar(&k.hang, "hang", false, "transfer never answers")
	fs.BoolVar(&k.inputRequired, "input-required", false, "transfer answers input_required")
	fs.IntVar(&k.schemaVariant, "schema-variant", 0, "publish transfer definition variant `n` (0-4)")
	fs.BoolVar(&k.noVerify, "no-verify", false, "publish transfer without its [Verify] label")
	fs.StringVar(&k.hide, "hide", "", "comma-separated tool `names` not to publish")
	fs.StringVar(&k.ask, "ask", "", "get_balance first asks the form elicitation in `file`")
	jsonResponse := fs.Bool("json-response", false, "with --http, answer with application/json instead of an event stream")
	stateful := fs.Bool("stateful", false, "with --http, keep sessions (legacy protocol revisions only) instead of serving statelessly")
	var af authFlags
	fs.StringVar(&af.issuer, "auth-issuer", "", "with --http, require access tokens of the authorization server `issuer`")
	fs.StringVar(&af.resource, "resource", "", "with --auth-issuer, the resource `URI` tokens must be for (default: the server's /mcp URL)")
	fs.Var(&af.scopes, "scope", "with --auth-issuer, a `scope` every token must grant (repeatable)")
	fs.Var(&af.owners, "owner", "with --auth-issuer, the token subject that owns a ledger account, `SUB=ACCOUNT` (repeatable)")
	if err := fs.Parse(args); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		os.Exit(2)
	}
	if k.schemaVariant < 0 || k.schemaVariant > 4 {
		fmt.Fprintln(stderr, "bank: --schema-variant must be 0-4")
		os.Exit(2)
	}
	if err := af.check(*httpAddr != ""); err != nil {
		fmt.Fprintln(stderr, "bank:", err)
		os.Exit(2)
	}

	ledger, err := OpenLedger(*statePath)
	if err != nil {
		return err
	}
	var calls *CallLog
	if *logPath != "" {
		if calls, err = OpenCallLog(*logPath); err != nil {
			return err
		}
		defer calls.Close()
	}
	acc, err := af.access(ledger)
	if err != nil {
		return err
	}
	newServer := func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "1.0.0"}, nil)
		if calls != nil {
			s.AddReceivingMiddleware(calls.Middleware)
		}
		addTools(s, ledger, k, acc)
		return s
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *httpAddr == "" {
		err := newServer().Run(ctx, &mcp.StdioTransport{})
		if ctx.Err() != nil || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	var signIn *authFlags
	if af.issuer != "" {
		signIn = &af
	}
	return serveHTTP(ctx, *httpAddr, newServer(), &mcp.StreamableHTTPOptions{
		Stateless:    !*stateful,
		JSONResponse: *jsonResponse,
		Logger:       log,
	}, signIn, log, stderr)
}

// serveHTTP serves s on addr at /mcp; with signIn, only to requests with an
// access token its resource server accepts.
func serveHTTP(ctx context.Context, addr string, s *mcp.Server, opts *mcp.StreamableHTTPOptions, signIn *authFlags, log *slog.Logger, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	endpoint := fmt.Sprintf("http://%s/mcp", ln.Addr())
	mux := http.NewServeMux()
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, opts)
	if signIn != nil {
		// The listener is open first so that the default resource can be
		// the URL it has; nothing is served before the issuer is found.
		rs, err := newResourceServer(ctx, signIn, endpoint, nil, log)
		if err != nil {
			ln.Close()
			return err
		}
		rs.register(mux)
		h = rs.guard(h)
	}
	mux.Handle("/mcp", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "bank: listening on %s\n", endpoint)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
