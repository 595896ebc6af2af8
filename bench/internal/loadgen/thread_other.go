//go:build !linux

package loadgen

import "time"

// ThreadCPU is the process's CPU time where a thread's own cannot be read (see the Linux
// version); like SelfCPU, it is 0 off Linux.
func ThreadCPU() time.Duration { return SelfCPU() }
