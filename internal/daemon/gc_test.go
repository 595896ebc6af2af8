package daemon

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	tests := []struct {
		name       string
		env        map[string]string
		wantPct    int
		wantGOGC   string
		wantSource string
		wantLimit  string
	}{
		{"unset takes the default", nil, DefaultGCPercent, "400", "default", "none"},
		{"operator GOGC wins", map[string]string{"GOGC": "100"}, 100, "100", "environment", "none"},
		{"memory limit is reported", map[string]string{"GOMEMLIMIT": "512MiB"}, DefaultGCPercent, "400", "default", "512MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetGCPercent(100) // what the runtime read from GOGC=100 (or unset)
			var buf bytes.Buffer
			TuneGC(func(k string) string { return tt.env[k] }, slog.New(slog.NewJSONHandler(&buf, nil)))
			if got := debug.SetGCPercent(100); got != tt.wantPct {
				t.Errorf("GC percent = %d, want %d", got, tt.wantPct)
			}
			var line map[string]any
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("log line %q: %v", buf.String(), err)
			}
			if line["msg"] != "gc" || line["gogc"] != tt.wantGOGC || line["source"] != tt.wantSource || line["gomemlimit"] != tt.wantLimit {
				t.Errorf("log line = %v", line)
			}
		})
	}
}
