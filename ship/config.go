package ship

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/confx"
)

// Defaults of Config.
const (
	DefaultBatchSize   = 500
	MaxBatchSize       = 10000
	DefaultInterval    = time.Second
	DefaultMaxLag      = 1_000_000
	DefaultHTTPTimeout = 10 * time.Second
	DefaultMaxBytes    = 100 << 20
	DefaultMaxFiles    = 5
	// MaxBackoff bounds the wait between attempts while a sink fails.
	MaxBackoff = 30 * time.Second
)

// Formats of an HTTP sink.
const (
	FormatOPA   = "opa"   // a JSON array of decision-log events, as OPA's decision-log API takes
	FormatJSONL = "jsonl" // one record per line
)

// Config is the shipping section of verdictd's and the executor's config files.
type Config struct {
	// Sinks receive every record. Each has its own cursor: a slow or failing sink delays no
	// other.
	Sinks []SinkConfig `json:"sinks"`
	// BatchSize is the most records one delivery carries (default 500).
	BatchSize int `json:"batch_size,omitempty"`
	// Interval is how often the outbox is read when the last read found nothing (default 1s).
	Interval confx.Duration `json:"interval,omitempty"`
	// MaxLag is how many records a sink may fall behind before the oldest are dropped
	// (default 1,000,000).
	MaxLag int `json:"max_lag,omitempty"`
}

// SinkConfig is one sink: exactly one of HTTP and File.
type SinkConfig struct {
	// Name identifies the sink's cursor; renaming a sink starts it from the current end.
	Name string    `json:"name"`
	HTTP *HTTPSink `json:"http,omitempty"`
	File *FileSink `json:"file,omitempty"`
	// Unmasked ships argument values and the other masked members as they are recorded.
	Unmasked bool `json:"unmasked,omitempty"`
}

// HTTPSink posts each batch, gzip-compressed.
type HTTPSink struct {
	URL string `json:"url"`
	// Format is "opa" (the default) or "jsonl".
	Format string `json:"format,omitempty"`
	// TokenFile holds a bearer token sent in Authorization (optional).
	TokenFile string `json:"token_file,omitempty"`
	// Timeout bounds one delivery (default 10s).
	Timeout confx.Duration `json:"timeout,omitempty"`
}

// FileSink appends JSONL to a local file and rotates it by size.
type FileSink struct {
	Path string `json:"path"`
	// MaxBytes rotates the file once it is larger (default 100 MiB).
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// MaxFiles is how many rotated files are kept beside the current one (default 5).
	MaxFiles int `json:"max_files,omitempty"`
}

var sinkName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// Validate reports every problem of c, each placed at its key under prefix (the config
// section's name).
func (c *Config) Validate(prefix string) []error {
	var errs []error
	put := func(path string, err error) { errs = append(errs, confx.Place(path, fmt.Errorf("%s: %w", path, err))) }
	at := func(key string, err error) { put(confx.Key(prefix, key), err) }
	if len(c.Sinks) == 0 {
		at("sinks", errors.New("shipping needs at least one sink"))
	}
	if c.BatchSize < 0 || c.BatchSize > MaxBatchSize {
		at("batch_size", fmt.Errorf("batch_size %d is not between 1 and %d", c.BatchSize, MaxBatchSize))
	}
	if c.Interval.D() < 0 {
		at("interval", errors.New("interval must not be negative"))
	}
	if c.MaxLag < 0 {
		at("max_lag", errors.New("max_lag must not be negative"))
	}
	seen := map[string]bool{}
	for i, s := range c.Sinks {
		key := confx.Index(confx.Key(prefix, "sinks"), i)
		sat := func(k string, err error) {
			path := key
			for _, part := range strings.Split(k, ".") {
				path = confx.Key(path, part)
			}
			put(path, err)
		}
		switch {
		case !sinkName.MatchString(s.Name):
			sat("name", fmt.Errorf("sink name %q: use lower-case letters, digits, '_', '-', '.'", s.Name))
		case seen[s.Name]:
			sat("name", fmt.Errorf("sink name %q is used twice", s.Name))
		}
		seen[s.Name] = true
		switch {
		case (s.HTTP == nil) == (s.File == nil):
			put(key, errors.New("a sink is exactly one of http and file"))
		case s.HTTP != nil:
			u, err := url.Parse(s.HTTP.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				sat("http.url", fmt.Errorf("url %q is not an http(s) URL", s.HTTP.URL))
			}
			if f := s.HTTP.Format; f != "" && f != FormatOPA && f != FormatJSONL {
				sat("http.format", fmt.Errorf("format %q: want %q or %q", f, FormatOPA, FormatJSONL))
			}
			if s.HTTP.Timeout.D() < 0 {
				sat("http.timeout", errors.New("timeout must not be negative"))
			}
		case s.File != nil:
			if s.File.Path == "" || !filepath.IsAbs(s.File.Path) {
				sat("file.path", fmt.Errorf("path %q must be absolute", s.File.Path))
			}
			if s.File.MaxBytes < 0 || s.File.MaxFiles < 0 {
				sat("file", errors.New("max_bytes and max_files must not be negative"))
			}
		}
	}
	return errs
}

func (c *Config) batchSize() int { return cmp.Or(c.BatchSize, DefaultBatchSize) }

func (c *Config) interval() time.Duration { return c.Interval.Or(DefaultInterval) }

func (c *Config) maxLag() uint64 { return uint64(cmp.Or(c.MaxLag, DefaultMaxLag)) }
