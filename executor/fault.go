//go:build !verdict_faults

package executor

import "context"

// faultAfterConsume is a fault point between a shared store's consume and the started record,
// reachable only in a build with the verdict_faults tag (fault_enabled.go), which the crash
// tests use to kill an executor in exactly that window. In every other build it does nothing.
func (*Service) faultAfterConsume(context.Context, string) {}
