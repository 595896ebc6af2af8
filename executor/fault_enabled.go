//go:build verdict_faults

package executor

import (
	"context"
	"os"
)

// FaultAfterConsumeEnv names a file: a build with the verdict_faults tag appends the jti of
// every verdict it consumed in a shared store to it, synced, and then holds the request
// before its started record for good, so that a test can kill the process in that window
// knowing exactly which verdicts are in it. Builds without the tag have no such fault point.
const FaultAfterConsumeEnv = "VERDICT_FAULT_AFTER_CONSUME"

func (s *Service) faultAfterConsume(_ context.Context, jti string) {
	path := os.Getenv(FaultAfterConsumeEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.log.Error("fault point", "error", err)
		return
	}
	_, err = f.WriteString(jti + "\n")
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		s.log.Error("fault point", "error", err)
		return
	}
	select {} // the test kills the process here
}
