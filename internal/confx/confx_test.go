package confx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type sample struct {
	Listen  string   `json:"listen"`
	Timeout Duration `json:"timeout"`
}

func TestLoad(t *testing.T) {
	tests := []struct {
		yaml    string
		want    sample
		wantErr string
	}{
		{"listen: a\ntimeout: 30s\n", sample{"a", Duration(30 * time.Second)}, ""},
		{"listen: a\n", sample{"a", 0}, ""},
		{"listen: a\ntimeuot: 30s\n", sample{}, "unknown field"},
		{"listen: a\ntimeout: 30\n", sample{}, "duration must be a string"},
		{"listen: a\ntimeout: -1s\n", sample{}, "negative"},
		{"listen: a\nlisten: b\n", sample{}, "already set"},
		{"{\"listen\": \"j\", \"timeout\": \"1m\"}", sample{"j", Duration(time.Minute)}, ""},
	}
	for _, tt := range tests {
		p := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(p, []byte(tt.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		var got sample
		err := Load(p, &got)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err %v, want %q", tt.yaml, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: got %+v %v", tt.yaml, got, err)
		}
	}
	if (Duration(0)).Or(time.Second) != time.Second || Duration(2).Or(time.Second) != 2 {
		t.Fatal("Or")
	}
}

type validated struct {
	Listen string `json:"listen"`
}

func (v *validated) Validate() error {
	if v.Listen == "" {
		return errors.New("listen is required")
	}
	return nil
}

func TestLoadValid(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("listen: a\n"), 0o600)
	os.WriteFile(bad, []byte("{}\n"), 0o600)
	if c, err := LoadValid[validated](good); err != nil || c.Listen != "a" {
		t.Fatalf("good: %+v %v", c, err)
	}
	if _, err := LoadValid[validated](bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "listen is required") {
		t.Fatalf("bad: %v", err)
	}
}
