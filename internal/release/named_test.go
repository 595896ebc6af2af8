package release

import (
	"testing"
	"time"
)

func TestNamedSource(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name, version, revision, time string
		wantErr                       bool
	}{
		{"all three", "v1.2.3", rev, "2026-12-02T03:04:05Z", false},
		{"no v", "1.2.3", rev, "2026-12-02T03:04:05Z", true},
		{"short revision", "v1.2.3", rev[:12], "2026-12-02T03:04:05Z", true},
		{"upper-case revision", "v1.2.3", "0123456789ABCDEF0123456789abcdef01234567", "2026-12-02T03:04:05Z", true},
		{"not RFC 3339", "v1.2.3", rev, "2026-12-02 03:04:05", true},
		{"missing time", "v1.2.3", rev, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NamedSource(tt.version, tt.revision, tt.time)
			if (err != nil) != tt.wantErr {
				t.Fatalf("NamedSource: %v, want error %v", err, tt.wantErr)
			}
			if err == nil && (s.Version != tt.version || s.Revision != tt.revision || !s.Time.Equal(time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC))) {
				t.Errorf("NamedSource = %+v", s)
			}
		})
	}
}
