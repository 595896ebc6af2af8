package loadgen

import (
	"syscall"
	"time"
)

// ThreadCPU returns the user + system CPU time the calling OS thread has used, to the
// microsecond (getrusage RUSAGE_THREAD), or 0 when it cannot be read. The caller keeps its
// goroutine on one thread (runtime.LockOSThread) between two readings, so that their
// difference is the work that goroutine did, and none of the process's other goroutines'.
func ThreadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
