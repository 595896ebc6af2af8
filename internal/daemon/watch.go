package daemon

import (
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// WatchFile polls path every interval until ctx ends and calls load with the file's content
// whenever it differs from inForce (the hash of the content the service runs on) and from the
// last content load refused. A refused content is not offered again while the file keeps it,
// so one broken file is one failed reload, not one per poll (an explicit reload, SIGHUP, still
// tries it); once the file is back to the content in force, a later return of the refused
// content is a new attempt. A file that cannot be read is skipped: one caught mid-replace shows
// up at the next poll, and one gone for good is reported by the reload that tries it.
func WatchFile(ctx context.Context, path string, interval time.Duration,
	inForce func() [sha256.Size]byte, load func(data []byte) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	WatchFileTicks(ctx, path, t.C, inForce, load)
}

// WatchFileTicks is WatchFile polling once for every value received from ticks instead of on a
// ticker of its own. Receiving is the last thing a poll does before the next, so whoever sends
// on an unbuffered ticks knows, once a value is taken, that the poll before it has ended: a
// test drives the polls that way and asserts what the watcher did (or did not do) without
// waiting on time.
func WatchFileTicks(ctx context.Context, path string, ticks <-chan time.Time,
	inForce func() [sha256.Size]byte, load func(data []byte) error) {
	var refused [sha256.Size]byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		switch sum := sha256.Sum256(data); {
		case sum == inForce():
			refused = [sha256.Size]byte{}
		case sum == refused:
		default:
			if load(data) != nil {
				refused = sum
			}
		}
	}
}
