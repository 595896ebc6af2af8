package etcdx

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/confx"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		c     Config
		store string
		want  []string // every problem, exactly, in order
	}{
		{"one endpoint", Config{Endpoints: []string{"http://127.0.0.1:2379"}}, "", nil},
		{"everything", Config{
			Endpoints: []string{"https://a:2379", "https://b:2379/"}, Prefix: "/p/",
			TLS:      &TLS{Cert: "c.pem", Key: "k.pem", CA: "ca.pem", ServerName: "etcd"},
			Username: "u", PasswordFile: "pw", DialTimeout: confx.Duration(time.Second), RequestTimeout: confx.Duration(time.Second),
		}, "nonce", nil},
		{"no endpoints", Config{}, "", []string{"s: etcd: at least one endpoint is required"}},
		{"no endpoints, store named", Config{}, "nonce", []string{"s: nonce: etcd: at least one endpoint is required"}},
		{"not http", Config{Endpoints: []string{"ftp://a:1"}}, "", []string{`s: etcd: endpoint "ftp://a:1": want an http:// or https:// URL`}},
		{"path", Config{Endpoints: []string{"http://a:1/v3"}}, "", []string{`s: etcd: endpoint "http://a:1/v3": want scheme://host:port and nothing else`}},
		{"mixed schemes", Config{Endpoints: []string{"https://a:1", "http://b:1"}}, "",
			[]string{"s: etcd: endpoints mix http and https: the client would use one transport for all"}},
		{"tls over http", Config{Endpoints: []string{"http://a:1"}, TLS: &TLS{CA: "ca.pem"}}, "",
			[]string{"s: etcd: tls is set but the endpoints are http://; use https:// endpoints"}},
		{"user without password file", Config{Endpoints: []string{"http://a:1"}, Username: "u"}, "",
			[]string{"s: username and password_file go together"}},
		{"password file without user", Config{Endpoints: []string{"http://a:1"}, PasswordFile: "pw"}, "",
			[]string{"s: username and password_file go together"}},
		{"key without cert", Config{Endpoints: []string{"https://a:1"}, TLS: &TLS{Key: "k.pem"}}, "",
			[]string{"s.tls: cert and key go together"}},
		// Every problem is reported at once, endpoints first.
		{"all at once", Config{TLS: &TLS{Cert: "c.pem"}, Username: "u"}, "nonce", []string{
			"s: nonce: etcd: at least one endpoint is required",
			"s: username and password_file go together",
			"s.tls: cert and key go together",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, err := range tt.c.Validate("s", tt.store) {
				got = append(got, err.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Validate = %q\nwant       %q", got, tt.want)
			}
		})
	}
}

// TestConfigEmpty sets each key alone: every one of them makes the block non-empty, so a key
// added to Config later cannot slip past a section whose kind is not etcd.
func TestConfigEmpty(t *testing.T) {
	if c := (Config{}); !c.Empty() {
		t.Fatal("the zero Config is not empty")
	}
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			var c Config
			v := reflect.ValueOf(&c).Elem().Field(i)
			switch v.Kind() {
			case reflect.Slice:
				v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			case reflect.Pointer:
				v.Set(reflect.New(v.Type().Elem()))
			case reflect.String:
				v.SetString("x")
			case reflect.Int64:
				v.SetInt(1)
			default:
				t.Fatalf("field %s of kind %s: teach this test to set it", f.Name, v.Kind())
			}
			if c.Empty() {
				t.Fatalf("Config with only %s set is empty", f.Name)
			}
		})
	}
}

// TestConfigKeys pins the key names, which the daemons' config files use (docs/operations.md).
func TestConfigKeys(t *testing.T) {
	c := Config{
		Endpoints: []string{"https://a:1"}, Prefix: "/p/", TLS: &TLS{CA: "ca.pem"}, Username: "u", PasswordFile: "pw",
		DialTimeout: confx.Duration(time.Second), RequestTimeout: confx.Duration(time.Second),
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	slices.Sort(got)
	want := []string{"dial_timeout", "endpoints", "password_file", "prefix", "request_timeout", "tls", "username"}
	if !slices.Equal(got, want) {
		t.Fatalf("keys %q, want %q", got, want)
	}
}

func TestConfigReadPassword(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing")
	empty := file("empty", "\r\n")
	tests := []struct {
		name, file, want, wantErr string
	}{
		{"no file", "", "", ""},
		{"line end trimmed", file("pw", "s3cret\r\n"), "s3cret", ""},
		{"inner spaces kept", file("spaces", " a b \n"), " a b ", ""},
		{"missing", missing, "", "s.password_file: open " + missing},
		{"only a line end", empty, "", "s.password_file " + empty + " is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{PasswordFile: tt.file}
			got, err := c.ReadPassword("s")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one starting %q", err, tt.wantErr)
			case got != tt.want:
				t.Fatalf("password %q, want %q", got, tt.want)
			}
		})
	}
}
