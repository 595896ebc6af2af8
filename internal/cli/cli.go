// Package cli owns what the project's commands do the same way around their subcommands:
// choosing one by the first argument, help, the version subcommand, and the keygen subcommand of
// the two daemons that sign (verdictd its verdicts, the executor its receipts). It is the
// commands' own: the services know nothing of flags or exit codes.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/internal/buildinfo"
	"github.com/verdictgate/verdict/keys"
)

// A Command is a subcommand: it runs with the arguments after its name and returns the exit
// code (0 done, 1 failed, 2 a usage error).
type Command func(args []string, stdout, stderr io.Writer) int

// Main runs the subcommand args[0] of the program name: one of cmds, version (the build), or
// help. usage is the program's usage text: help writes it to stdout, and no subcommand or an
// unknown one writes it to stderr and ends with 2.
func Main(name, usage string, cmds map[string]Command, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if cmd, ok := cmds[args[0]]; ok {
		return cmd(args[1:], stdout, stderr)
	}
	switch args[0] {
	case "version":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "usage: %s version\n", name)
			return 2
		}
		fmt.Fprintln(stdout, name, buildinfo.Read())
		return 0
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n", name, args[0])
	fmt.Fprint(stderr, usage)
	return 2
}

// Flags returns the flag set of the subcommand name ("verdictd audit"): it writes its errors to
// stderr and, after -h or an error, usage and then its flags with their defaults.
func Flags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args with fs. When ok is false the command ends at once with code: 0 after -h,
// bad after an error (which fs has written, with its usage).
func Parse(fs *flag.FlagSet, args []string, bad int) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return bad, false
	}
	return 0, true
}

// Keygen is the keygen subcommand of the program name: keygen --out DIR [--alg EdDSA|ES256]
// writes a new signing key and its public JWKS with keys.Keygen.
func Keygen(name string) Command {
	return func(args []string, stdout, stderr io.Writer) int {
		fs := Flags(name+" keygen", "usage: "+name+" keygen --out DIR [--alg EdDSA|ES256]\n", stderr)
		out := fs.String("out", "", "`dir`ectory for signing.jwk (private, 0600) and jwks.json (public)")
		alg := fs.String("alg", "EdDSA", "signature `algorithm`: EdDSA or ES256")
		if code, ok := Parse(fs, args, 2); !ok {
			return code
		}
		if *out == "" || fs.NArg() > 0 || (*alg != "EdDSA" && *alg != "ES256") {
			fs.Usage()
			return 2
		}
		kid, err := keys.Keygen(*out, jose.SignatureAlgorithm(*alg))
		if err != nil {
			fmt.Fprintf(stderr, "%s keygen: %v\n", name, err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s/%s and %s/jwks.json (kid %s, %s)\n", *out, keys.PrivateKeyFile, *out, kid, *alg)
		return 0
	}
}
