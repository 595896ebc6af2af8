package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"

	auditpkg "github.com/verdictgate/verdict/audit"
	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/store"
)

// auditSources is a repeatable flag.
type auditSources []string

func (s *auditSources) String() string { return strings.Join(*s, ",") }

func (s *auditSources) Set(v string) error {
	if v == "" {
		return errors.New("empty source")
	}
	*s = append(*s, v)
	return nil
}

// sourceFlags are the flags of the commands that read records from files or daemons (audit,
// policy replay): the admin token and the TLS of HTTP sources. One place, so that a source
// is read the same way by each.
type sourceFlags struct {
	token, tokenFile, caFile, certFile, keyFile *string
	plainHTTP                                   *bool

	client *http.Client
}

func newSourceFlags(fs *flag.FlagSet) *sourceFlags {
	return &sourceFlags{
		token:     fs.String("token", "", "admin bearer `token` for HTTP sources (visible to other local users: prefer --token-file)"),
		tokenFile: fs.String("token-file", "", "read the admin bearer token for HTTP sources from `file`"),
		caFile:    fs.String("cacert", "", "PEM `file` of the CAs trusted for https sources (default: the system's)"),
		certFile:  fs.String("cert", "", "client certificate `file` for daemons that require mTLS"),
		keyFile:   fs.String("key", "", "client key `file` for --cert"),
		plainHTTP: fs.Bool("allow-plain-http", false, "allow http:// sources on non-loopback hosts (the token travels in clear)"),
	}
}

// check reports a usage mistake of the flags, "" when there is none.
func (f *sourceFlags) check() string {
	if *f.token != "" && *f.tokenFile != "" {
		return "give --token or --token-file, not both"
	}
	return ""
}

// open reads the token file and makes the HTTP client of the sources.
func (f *sourceFlags) open() error {
	if *f.tokenFile != "" {
		b, err := opfile.ReadFile(*f.tokenFile)
		if err != nil {
			return fmt.Errorf("token file: %w", err)
		}
		*f.token = strings.TrimSpace(string(b))
	}
	var err error
	f.client, err = auditpkg.NewHTTPClient(auditpkg.TLSOptions{CAFile: *f.caFile, CertFile: *f.certFile, KeyFile: *f.keyFile})
	return err
}

// sources parses locs, read with token (the --token's when empty); unmasked asks daemons for
// the records unmasked (policy replay alone does). Call open first.
func (f *sourceFlags) sources(locs []string, token string, unmasked bool) ([]auditpkg.Source, error) {
	if token == "" {
		token = *f.token
	}
	out := make([]auditpkg.Source, 0, len(locs))
	for _, loc := range locs {
		s, err := auditpkg.ParseSource(loc, auditpkg.SourceOptions{Token: token, Client: f.client, AllowPlainHTTP: *f.plainHTTP, Unmasked: unmasked})
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// hintLocked tells the operator how to read a running daemon's records when err is a bbolt
// file it holds locked; flagName is the source's flag, "" for the audit's own (--decisions,
// --executions).
func hintLocked(stderr io.Writer, cmd string, err error, flagName string) {
	var se *auditpkg.SourceError
	if errors.As(err, &se) && errors.Is(err, store.ErrLocked) {
		if flagName == "" {
			flagName = se.Records + "s"
		}
		fmt.Fprintf(stderr, "%s: a running daemon holds %s; read its records over HTTP instead: --%s https://HOST:PORT --token-file ADMIN_TOKEN_FILE\n",
			cmd, se.Source, flagName)
	}
}
