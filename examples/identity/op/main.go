// Command op is a small OpenID Provider for trying the identity package and for tests that
// need a real authorization server process. It is zitadel/oidc's example provider (its op
// package, example storage and login form) with what a resource server needs of it: access
// tokens are JWTs whose aud is the resource they are for.
//
// Usage:
//
//	op [-listen ADDR] [-resource URI] [-client ID:SECRET[=RESOURCE[,RESOURCE]...]]...
//	   [-opaque-client ID:SECRET[=RESOURCE[,RESOURCE]...]]... [-introspector ID:SECRET]...
//	   [-group SUB=GROUP]... [-exchange-client ID:SECRET=AUDIENCE[,AUDIENCE]...]...
//	   [-registration] [-require-resource]
//
// The provider listens on ADDR (port 0 picks a free port; the host must be a loopback
// address, as the issuer is plain http) and, once it accepts connections, prints one JSON
// line on stdout:
//
//	{"issuer":"http://127.0.0.1:41234","port":41234}
//
// Clients:
//
//   - each -client is a confidential client of the client-credentials grant whose tokens are
//     for RESOURCE (default: -resource; several, comma-separated, make a token whose aud
//     names them all) and whose sub is its ID; without -client there is one,
//     agent:agent-secret;
//   - each -opaque-client is the same with opaque access tokens, which a resource server
//     asks the introspection endpoint about, authenticating as an -introspector (HTTP Basic);
//   - "native" is a public client of the authorization code grant with PKCE (S256), redirect
//     URI http://127.0.0.1/callback (any port), whose tokens are for -resource. Its users
//     are those of the example storage: "test-user@HOST" (sub "id1") and "test-user2"
//     (sub "id2"), both with the password "verysecure". A request whose scope includes
//     offline_access gets a refresh token too, which the refresh_token grant rotates (the
//     one sent is spent) and the revocation endpoint (/revoke, RFC 7009) revokes;
//   - with -registration, the registration endpoint (RFC 7591) at /register, advertised in
//     the discovery document as registration_endpoint, registers clients of the
//     authorization code grant with PKCE, like "native": public ones
//     (token_endpoint_auth_method none) and confidential ones with HTTP Basic
//     (client_secret_basic, the default), with grant_types authorization_code and, if asked,
//     refresh_token, response_types code, and exactly the redirect_uris they name (a
//     public client's loopback ones on any port). Anyone may register, at most 1,000 clients;
//     anything else is refused (invalid_redirect_uri, invalid_client_metadata);
//   - each -exchange-client is a confidential client (HTTP Basic) of the token-exchange grant
//     (RFC 8693), as a daemon that acts for the users at another resource is: it sends a
//     user's access token issued by this provider as the subject_token (subject_token_type
//     access_token) and gets an access token of the same sub whose aud is the audience it
//     asks for, which must be one of its AUDIENCEs, as must every resource it names; any other
//     request is refused (invalid_target, or invalid_request for another token type, an actor
//     token or no audience). Other clients may not exchange tokens.
//
// With -require-resource, the authorization request, the code exchange and the refresh must
// each name -resource in a resource parameter (RFC 8707), and no other resource: otherwise
// the authorization request's error goes back to the redirect URI, and the token endpoint
// answers, with invalid_target.
//
// Each -group puts GROUP in the "groups" claim of the access tokens and ID tokens issued to the
// user whose sub is SUB (say -group id2=payments-approvers); a user with none has no such claim.
//
// Tokens live five minutes. The signing key is made afresh on each start.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"

	"github.com/verdictgate/verdict/internal/loopback"
)

// DefaultResource is the resource tokens are for unless -resource says otherwise.
const DefaultResource = "http://127.0.0.1:8792/mcp"

// NativeClientID and NativeRedirectURI describe the authorization-code client.
const (
	NativeClientID    = "native"
	NativeRedirectURI = "http://127.0.0.1/callback"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "op:", err)
		os.Exit(1)
	}
}

// clientFlags collects -client values.
type clientFlags []service

func (c *clientFlags) String() string { return "" }

func (c *clientFlags) Set(v string) error {
	idSecret, resources, hasResources := strings.Cut(v, "=")
	id, secret, ok := strings.Cut(idSecret, ":")
	if !ok || id == "" || secret == "" {
		return errors.New("want ID:SECRET[=RESOURCE[,RESOURCE]...]")
	}
	sv := service{id: id, secret: secret}
	if hasResources {
		sv.resources = strings.Split(resources, ",")
		if slices.Contains(sv.resources, "") {
			return errors.New("want ID:SECRET[=RESOURCE[,RESOURCE]...], no resource empty")
		}
	}
	*c = append(*c, sv)
	return nil
}

// groupFlags collects -group values: the groups of each user, by sub.
type groupFlags map[string][]string

func (g groupFlags) String() string { return "" }

func (g groupFlags) Set(v string) error {
	sub, group, ok := strings.Cut(v, "=")
	if !ok || sub == "" || group == "" {
		return errors.New("want SUB=GROUP")
	}
	g[sub] = append(g[sub], group)
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("op", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "listen `address` (loopback only)")
	resource := fs.String("resource", DefaultResource, "the resource `URI` tokens are for (their aud)")
	var clients, opaque, introspectors, exchangers clientFlags
	fs.Var(&clients, "client", "a client-credentials client `ID:SECRET[=RESOURCE]` (repeatable)")
	fs.Var(&opaque, "opaque-client", "a client-credentials client `ID:SECRET[=RESOURCE]` with opaque tokens (repeatable)")
	fs.Var(&introspectors, "introspector", "a client `ID:SECRET` allowed to introspect tokens (repeatable)")
	fs.Var(&exchangers, "exchange-client", "a token-exchange client `ID:SECRET=AUDIENCE[,AUDIENCE]` (repeatable)")
	groups := groupFlags{}
	fs.Var(groups, "group", "a group `SUB=GROUP` of a user, in the groups claim of its access and ID tokens (repeatable)")
	registration := fs.Bool("registration", false, "serve an RFC 7591 registration endpoint at /register")
	requireResource := fs.Bool("require-resource", false, "require the resource parameter (RFC 8707) naming -resource on the authorization request, the code exchange and the refresh")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("-listen: %w", err)
	}
	if !loopback.Host(host) {
		return fmt.Errorf("-listen %s: the issuer is plain http, so the host must be a loopback address", *listen)
	}
	for _, x := range exchangers {
		if len(x.resources) == 0 {
			return fmt.Errorf("-exchange-client %s: want ID:SECRET=AUDIENCE[,AUDIENCE]...: the audiences it may ask tokens for", x.id)
		}
	}
	if len(clients) == 0 && len(opaque) == 0 {
		clients = clientFlags{{id: "agent", secret: "agent-secret"}}
	}
	for _, o := range opaque {
		o.opaque = true
		clients = append(clients, o)
	}
	for i := range clients {
		if clients[i].resources == nil {
			clients[i].resources = []string{*resource}
		}
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	addr := ln.Addr().(*net.TCPAddr)
	issuer := "http://" + net.JoinHostPort(host, strconv.Itoa(addr.Port))

	// The example server logs every request through the default logger; send it to stderr,
	// leaving stdout to the one line a test reads.
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	st := newStore(issuer, *resource, clients, introspectors, exchangers)
	st.groups = groups
	st.requireResource = *requireResource
	handler := http.Handler(exampleop.SetupServer(issuer, st, nil, false))
	if *requireResource {
		handler = st.resourceCheck(handler)
	}
	if *registration {
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.HandleFunc("POST "+registerPath, st.register)
		mux.Handle("GET "+discoveryPath, withRegistrationEndpoint(issuer, handler))
		handler = mux
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
	}
	line, _ := json.Marshal(struct {
		Issuer string `json:"issuer"`
		Port   int    `json:"port"`
	}{issuer, addr.Port})
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return err
	}

	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}
