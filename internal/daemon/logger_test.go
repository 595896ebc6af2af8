package daemon

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// TestLoggerWritesDurationsAsStrings checks that a duration reaches the JSON log as Go writes
// it, however it was passed, at the top level and inside a group, and that nothing else is
// changed.
func TestLoggerWritesDurationsAsStrings(t *testing.T) {
	var buf bytes.Buffer
	log := Logger(&buf, "test")
	log.Info("line",
		"retry_in", 1500*time.Millisecond,
		slog.Duration("timeout", 10*time.Minute),
		slog.Group("batch", "delay", 50*time.Millisecond, "size", 3),
		"count", int64(42))
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	tests := []struct {
		key  string
		want any
	}{
		{"service", "test"},
		{"retry_in", "1.5s"},
		{"timeout", "10m0s"},
		{"count", float64(42)},
	}
	for _, tt := range tests {
		if got[tt.key] != tt.want {
			t.Errorf("%s = %#v, want %#v", tt.key, got[tt.key], tt.want)
		}
	}
	batch, _ := got["batch"].(map[string]any)
	if batch["delay"] != "50ms" || batch["size"] != float64(3) {
		t.Errorf("batch = %v, want delay 50ms and size 3", got["batch"])
	}
}
