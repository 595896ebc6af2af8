// Package confx owns how the daemons read their YAML config files: strictly (an unknown or
// misspelt key is an error, never silently ignored) and with Go duration strings.
package confx

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/verdictgate/verdict/internal/strictjson"
)

// Load reads the YAML (or JSON) file at path into v, refusing unknown keys, duplicate keys and
// keys that match a field only up to case.
func Load(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if err := strictjson.Unmarshal(js, v); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// Duration is a time.Duration written as a Go duration string ("30s", "10m").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string. Bare numbers are refused: "30" could mean seconds or
// nanoseconds, and a security timeout must not be guessed.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", s)
	}
	*d = Duration(v)
	return nil
}

// Or returns d, or def when d is zero.
func (d Duration) Or(def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return time.Duration(d)
}

// LoadValid reads the config file at path strictly (see Load) and validates it, so that every
// daemon refuses a config the same way: a read or syntax error names the file, and so does the
// list of problems Validate reports.
func LoadValid[T any, P interface {
	*T
	Validate() error
}](path string) (*T, error) {
	var c T
	if err := Load(path, &c); err != nil {
		return nil, err
	}
	if err := P(&c).Validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return &c, nil
}
