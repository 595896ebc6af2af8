package mcpgate

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxLimiters bounds the principals whose bucket is not full at once. Only a principal that
// started a gated call within the last call_burst/calls_per_minute minutes has such a bucket;
// past the bound, a new principal is refused rather than the memory grown.
const maxLimiters = 100000

// callLimiter is one token bucket per principal for first-round gated calls. A bucket that
// has refilled is the same as a new one, so it is dropped: the map holds only principals that
// spent tokens recently.
type callLimiter struct {
	every rate.Limit
	burst int

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newCallLimiter(perMinute, burst int) *callLimiter {
	return &callLimiter{every: rate.Limit(float64(perMinute) / 60), burst: burst, m: map[string]*rate.Limiter{}}
}

// allow takes one token of principal's bucket at now, or reports that there is none.
func (l *callLimiter) allow(principal string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.m[principal]
	if !ok {
		if len(l.m) >= maxLimiters {
			l.sweep(now)
			if len(l.m) >= maxLimiters {
				return false
			}
		}
		lim = rate.NewLimiter(l.every, l.burst)
		l.m[principal] = lim
	}
	return lim.AllowN(now, 1)
}

// sweep drops the buckets that have refilled by now. The caller holds mu.
func (l *callLimiter) sweep(now time.Time) {
	for p, lim := range l.m {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.m, p)
		}
	}
}
