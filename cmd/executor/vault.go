package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/internal/cli"
)

const vaultUsage = `usage: executor vault rekey --config FILE

Re-encrypts to the vault's current key (the first of vault.key_files) every grant only an
older key decrypts, and says how many; run it until it reports 0. A vault in the executor's
file is read with the executor stopped (its file is its own while it runs); one in etcd with the
executors running. A grant no key reads is named, and left for revocation.
docs/credentials.md#rotating-the-key has the steps.

flags:
`

func vaultCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "rekey" {
		fmt.Fprint(stderr, vaultUsage)
		return 2
	}
	fs := cli.Flags("executor vault rekey", vaultUsage, stderr)
	configPath := fs.String("config", "", "the executor's config `FILE`")
	if code, ok := cli.Parse(fs, args[1:], 2); !ok {
		return code
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	v, err := executor.OpenVault(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "executor vault rekey:", err)
		return 1
	}
	defer v.Close()
	n, err := v.Rekey(ctx)
	fmt.Fprintf(stdout, "%d grants re-encrypted to %s\n", n, cfg.Vault.KeyFiles[0])
	if err != nil {
		fmt.Fprintln(stderr, "executor vault rekey:", err)
		return 1
	}
	return 0
}
