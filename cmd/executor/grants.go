package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/verdictgate/verdict/audit"
	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/internal/cli"
	"github.com/verdictgate/verdict/internal/loopback"
	"github.com/verdictgate/verdict/internal/opfile"
)

const grantsUsage = `usage: executor grants list   --url URL --token-file FILE --principal P [--json] [--cacert FILE]
       executor grants revoke --url URL --token-file FILE --principal P --server S [--cacert FILE]

Lists a principal's grants at a running executor (what may be shown: no token), or revokes one:
at its authorization server when that offers revocation, and at the executor in any case. The
executor's admin token is read from FILE; URL is https, or http on a loopback host.

flags:
`

func grants(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "revoke") {
		fmt.Fprint(stderr, grantsUsage)
		return 2
	}
	verb := args[0]
	fs := cli.Flags("executor grants "+verb, grantsUsage, stderr)
	base := fs.String("url", "", "the executor's base `URL`")
	tokenFile := fs.String("token-file", "", "read the executor's admin token from `file`")
	principal := fs.String("principal", "", "whose grants")
	server := fs.String("server", "", "the grant's server (revoke)")
	asJSON := fs.Bool("json", false, "print the grants as JSON (list)")
	caFile := fs.String("cacert", "", "PEM `file` of the CAs trusted for an https URL (default: the system's)")
	if code, ok := cli.Parse(fs, args[1:], 2); !ok {
		return code
	}
	usageError := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "executor grants: "+format+"\n", a...)
		fs.Usage()
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return usageError("unexpected argument %q", fs.Arg(0))
	case *base == "" || *tokenFile == "" || *principal == "":
		return usageError("--url, --token-file and --principal are required")
	case verb == "revoke" && *server == "":
		return usageError("--server is required")
	case verb == "list" && *server != "":
		return usageError("--server is for revoke")
	}
	if err := loopback.SecureURL(*base); err != nil {
		return usageError("--url: %v: the admin token is sent there", err)
	}
	b, err := opfile.ReadFile(*tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "executor grants: token file: %v\n", err)
		return 1
	}
	hc, err := audit.NewHTTPClient(audit.TLSOptions{CAFile: *caFile})
	if err != nil {
		fmt.Fprintf(stderr, "executor grants: %v\n", err)
		return 1
	}
	hc.Timeout = time.Minute
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c, err := client.New(*base, client.WithAdminToken(strings.TrimSpace(string(b))), client.WithHTTPClient(hc))
	if err != nil {
		fmt.Fprintf(stderr, "executor grants: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if verb == "revoke" {
		out, err := c.RevokeGrant(ctx, *principal, *server)
		if err != nil {
			fmt.Fprintf(stderr, "executor grants revoke: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "revoked grant %s of %s at %s (authorization server: %s)\n", out.Grant.ID, out.Grant.Principal, out.Grant.Server, out.Upstream)
		return 0
	}
	gs, err := c.Grants(ctx, *principal)
	if err != nil {
		fmt.Fprintf(stderr, "executor grants list: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(gs)
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVER\tGRANT\tKIND\tISSUER\tSCOPES\tEXPIRES\tREFRESH\tUPDATED")
		for _, g := range gs {
			exp := "-"
			if !g.Expiry.IsZero() {
				exp = g.Expiry.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%t\t%s\n", g.Server, g.ID, g.Kind, g.Issuer, strings.Join(g.Scopes, " "), exp,
				g.HasRefreshToken, g.Updated.UTC().Format(time.RFC3339))
		}
		err = tw.Flush()
	}
	if err != nil {
		return 1
	}
	return 0
}
