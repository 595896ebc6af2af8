package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/verdictgate/verdict/internal/cli"
	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/policy/initpolicy"
	"github.com/verdictgate/verdict/upstream"
)

// policyInit writes a first policy for the servers --config declares, from their tools as they
// list them now (or as --from saved them), to --out or stdout. An --out that exists is never
// written: it is the policy a person has been working on, so the command prints the unified
// diff from it to what it would write now, and exits 1 when the two differ.
func policyInit(args []string, stdout, stderr io.Writer) int {
	fset := cli.Flags("verdictd policy init", "usage: verdictd policy init --config FILE [--out FILE] [--from DIR] [--timeout D]\n", stderr)
	config := fset.String("config", "", "a policy `file` declaring the servers (only its policy_version and servers are read; a policy in force will do)")
	out := fset.String("out", "", "write the policy to `file`, which must not exist yet; when it does, print how it differs from what would be written")
	from := fset.String("from", "", "read each server's tools from `dir`/<server id>.json, a saved tools/list answer, instead of listing them")
	timeout := fset.Duration("timeout", 15*time.Second, "bound on listing one server's tools")
	if code, ok := cli.Parse(fset, args, 2); !ok {
		return code
	}
	if *config == "" || fset.NArg() != 0 {
		fset.Usage()
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "verdictd policy init:", err)
		return 1
	}
	p, err := policy.Load(*config)
	if err != nil {
		return fail(err)
	}
	var listed map[string][]upstream.Tool
	if *from != "" {
		listed, err = initpolicy.ReadSaved(*from, p)
	} else {
		listed, err = initpolicy.List(context.Background(), p, *timeout)
	}
	if err != nil {
		return fail(err)
	}
	data, problems, err := initpolicy.Write(p, listed, *config)
	if err != nil {
		return fail(err)
	}
	name := cmp.Or(*out, "policy")
	for _, pr := range problems {
		fmt.Fprintf(stderr, "warning: %s (check-policy reports it until the server fixes it)\n", pr.In(name))
	}
	if *out == "" {
		if _, err := stdout.Write(data); err != nil {
			return fail(err)
		}
		return 0
	}
	existing, err := opfile.ReadFile(*out)
	switch {
	case err == nil:
		d := initpolicy.Diff(*out, existing, *out+" (as written now)", data)
		if d == "" {
			fmt.Fprintf(stderr, "%s: as it would be written now; not written\n", *out)
			return 0
		}
		io.WriteString(stdout, d)
		fmt.Fprintf(stderr, "%s exists and differs from the policy written now (above); not written\n", *out)
		return 1
	case !errors.Is(err, fs.ErrNotExist):
		return fail(err)
	}
	if err := create(*out, data); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stderr, "%s: written; class its tools, then check it with verdictd check-policy %s\n", *out, *out)
	return 0
}

// create writes data to a new file at path, never over one that appeared meanwhile.
func create(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return opfile.Explain(err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}
