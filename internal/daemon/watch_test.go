package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// WatchFile offers each new content once: a good one is loaded, a refused one is not offered
// again while the file keeps it, and comes back as a new attempt after the file returned to the
// content in force.
func TestWatchFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(s string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("good 1")
	var (
		mu      sync.Mutex
		current = sha256.Sum256([]byte("good 1"))
		offered []string
		polls   int // calls of inForce: one per poll of a readable file
	)
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchFileTicks(ctx, path, ticks, func() [sha256.Size]byte {
			mu.Lock()
			defer mu.Unlock()
			polls++
			return current
		}, func(data []byte) error {
			mu.Lock()
			defer mu.Unlock()
			offered = append(offered, string(data))
			if string(data) == "broken" {
				return errors.New("does not parse")
			}
			current = sha256.Sum256(data)
			return nil
		})
	}()
	// settle makes three polls of the file as it is now and returns once the first two have
	// ended (each tick is taken only after the poll before it): the content was seen, and one
	// offered twice would show.
	settle := func() {
		for range 3 {
			ticks <- time.Time{}
		}
	}
	settle()
	write("broken")
	settle()
	write("good 1") // back to the content in force
	settle()
	write("broken") // a new attempt
	settle()
	write("good 2")
	settle()
	// Unreadable: skipped, and inForce is not asked. The tick is taken once the last poll of
	// the file has ended.
	os.Remove(path)
	ticks <- time.Time{}
	mu.Lock()
	before := polls
	mu.Unlock()
	settle()
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if polls != before {
		t.Errorf("inForce asked %d times while the file was gone, want none", polls-before)
	}
	want := []string{"broken", "broken", "good 2"}
	if len(offered) != len(want) {
		t.Fatalf("offered %q, want %q", offered, want)
	}
	for i := range want {
		if offered[i] != want[i] {
			t.Fatalf("offered %q, want %q", offered, want)
		}
	}
}
