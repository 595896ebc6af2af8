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
//     (sub "id2"), both with the password "verysecure";
//   - each -exchange-client is a confidential client (HTTP Basic) of the token-exchange grant
//     (RFC 8693), as a daemon that acts for the users at another resource is: it sends a
//     user's access token issued by this provider as the subject_token (subject_token_type
//     access_token) and gets an access token of the same sub whose aud is the audience it
//     asks for, which must be one of its AUDIENCEs, as must every resource it names; any other
//     request is refused (invalid_target, or invalid_request for another token type, an actor
//     token or no audience). Other clients may not exchange tokens.
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
	srv := &http.Server{
		Handler:           exampleop.SetupServer(issuer, st, nil, false),
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
