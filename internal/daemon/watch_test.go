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
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchFile(ctx, path, 5*time.Millisecond, func() [sha256.Size]byte {
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
	// settle waits for three more polls of the file as it is now (the first may have read it
	// before the write), so that the content was seen and one offered twice would show.
	settle := func() {
		t.Helper()
		mu.Lock()
		target := polls + 3
		mu.Unlock()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			n := polls
			mu.Unlock()
			if n >= target {
				return
			}
		}
		t.Fatal("the watcher stopped polling")
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
	os.Remove(path) // unreadable: skipped, and inForce is not asked
	time.Sleep(30 * time.Millisecond)
	cancel()
	<-done
	want := []string{"broken", "broken", "good 2"}
	mu.Lock()
	defer mu.Unlock()
	if len(offered) != len(want) {
		t.Fatalf("offered %q, want %q", offered, want)
	}
	for i := range want {
		if offered[i] != want[i] {
			t.Fatalf("offered %q, want %q", offered, want)
		}
	}
}
