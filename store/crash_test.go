package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	bolt "go.etcd.io/bbolt"
)

const crashChildEnv = "STORE_CRASH_CHILD_DB"

// TestCrashKeepsAcknowledgedCommits runs a writer in a child process, kills it with SIGKILL
// while commits are streaming, and checks that the file opens cleanly, passes bbolt's
// consistency check, and holds every record the child had acknowledged.
func TestCrashKeepsAcknowledgedCommits(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "verdict.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKeepsAcknowledgedCommits$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := map[string]bool{}
	finished := map[string]api.ExecutionDecision{}
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "start":
			started[f[1]] = true
		case len(f) == 3 && f[0] == "finish":
			finished[f[1]] = api.ExecutionDecision(f[2])
		}
		if !killed && len(finished) >= 300 {
			// Mid-stream: the child keeps committing until the signal lands.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended before it was killed: %v", err)
	}

	db := openPath(t, path)
	if err := db.View(context.Background(), func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("consistency check: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ex := db.Executions()
	for id := range started {
		x, err := ex.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("acknowledged start %s: %v", id, err)
		}
		if want, ok := finished[id]; ok && x.Decision != want {
			t.Fatalf("acknowledged finish %s: decision %s, want %s", id, x.Decision, want)
		}
	}
	recovered, err := ex.RecoverStarted(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range recovered {
		if _, ok := finished[x.RecordID]; ok {
			t.Errorf("finished record %s was recovered as in flight", x.RecordID)
		}
	}
	t.Logf("%d starts and %d finishes acknowledged before the kill; %d recovered in flight",
		len(started), len(finished), len(recovered))
}

// crashChild starts and finishes executions from 16 goroutines forever, printing each
// acknowledgement after its commit returned.
func crashChild(path string) {
	db, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ex := db.Executions()
	acks := make(chan string, 64)
	for g := range 16 {
		go func() {
			ctx := context.Background()
			for i := 0; ; i++ {
				x := newExecution(fmt.Sprintf("jti_%d_%d", g, i), time.Now())
				if err := ex.Start(ctx, x); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				acks <- "start " + x.RecordID
				decision := []api.ExecutionDecision{api.ExecutionExecuted, api.ExecutionFailed}[i%2]
				if _, err := ex.Finish(ctx, x.RecordID, decision, "", "", time.Now()); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				acks <- fmt.Sprintf("finish %s %s", x.RecordID, decision)
			}
		}()
	}
	w := bufio.NewWriter(os.Stdout)
	for line := range acks {
		w.WriteString(line + "\n")
		// Flush only when nothing else is waiting: acknowledgements stay prompt and in order.
		if len(acks) == 0 {
			w.Flush()
		}
	}
}
