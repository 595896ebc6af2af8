package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/vault"
)

const vaultUsage = `usage: executor vault rekey --config FILE

Re-encrypts to the vault's current key (the first of vault.key_files) every grant only an
older key decrypts, and says how many; run it with the executor stopped (its file is its own
while it runs), until it reports 0. A grant no key reads is named, and left for revocation.
docs/credentials.md#rotating-the-key has the steps.

flags:
`

func vaultCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "rekey" {
		fmt.Fprint(stderr, vaultUsage)
		return 2
	}
	fs := flag.NewFlagSet("executor vault rekey", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "the executor's config `FILE`")
	fs.Usage = func() {
		fmt.Fprint(stderr, vaultUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *configPath == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "executor vault rekey: --config is required, and nothing else")
		fs.Usage()
		return 2
	}
	cfg, err := executor.LoadConfig(*configPath)
	if err != nil {
		fmt.Fprintln(stderr, "executor vault rekey:", err)
		return 1
	}
	if cfg.Vault == nil {
		fmt.Fprintln(stderr, "executor vault rekey: the config has no vault section: there is nothing to rekey")
		return 1
	}
	var keys []*vault.Key
	for i, f := range cfg.Vault.KeyFiles {
		k, err := vault.LoadKey(f)
		if err != nil {
			fmt.Fprintf(stderr, "executor vault rekey: vault.key_files[%d]: %v\n", i, err)
			return 1
		}
		keys = append(keys, k)
	}
	v, err := vault.Open(filepath.Join(cfg.DataDir, executor.DBFile), keys, vault.Options{MaxPerPrincipal: cfg.Vault.MaxGrantsPerPrincipal})
	if err != nil {
		fmt.Fprintln(stderr, "executor vault rekey:", err)
		return 1
	}
	defer v.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := v.Rekey(ctx)
	fmt.Fprintf(stdout, "%d grants re-encrypted to %s\n", n, keys[0])
	if err != nil {
		fmt.Fprintln(stderr, "executor vault rekey:", err)
		return 1
	}
	return 0
}
