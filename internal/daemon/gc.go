package daemon

import (
	"cmp"
	"log/slog"
	"runtime/debug"
)

// DefaultGCPercent is the garbage-collection target the daemons run with when the operator has
// not set GOGC. A daemon keeps a small live heap (tens of MiB) and allocates a lot per request
// (decoding, JWS, MCP JSON); at Go's default of 100 the collector runs every few hundred
// requests and takes a fifth of the CPU under load. 400 trades tens of MiB of memory for that
// CPU (bench/README.md has the measurements).
const DefaultGCPercent = 400

// TuneGC applies DefaultGCPercent unless GOGC is set in the environment (getenv is os.Getenv):
// the operator's GOGC, including GOGC=100 or off, always wins, and GOMEMLIMIT keeps its
// meaning (with a limit set, the collector runs more often only as the heap approaches it).
// It logs the setting in force.
func TuneGC(getenv func(string) string, log *slog.Logger) {
	gogc, source := getenv("GOGC"), "environment"
	if gogc == "" {
		debug.SetGCPercent(DefaultGCPercent)
		gogc, source = "400", "default"
	}
	log.Info("gc", "gogc", gogc, "source", source, "gomemlimit", cmp.Or(getenv("GOMEMLIMIT"), "none"))
}
