package main

import (
	"io"

	"github.com/verdictgate/verdict/internal/daemon"
)

func keygen(args []string, stdout, stderr io.Writer) int {
	return daemon.Keygen("verdictd", args, stdout, stderr)
}
