package confx

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
		{"listen: a\ntimeuot: 30s\n", sample{}, `:2:1: unknown field "timeuot" (did you mean "timeout"?)`},
		{"listen: a\ntimeout: 30\n", sample{}, `:2:10: timeout: duration must be a string such as "30s", got 30`},
		{"listen: a\ntimeout: -1s\n", sample{}, "negative"},
		{"listen: a\nlisten: b\n", sample{}, `:2:1: key "listen" already set at line 1`},
		{"{\"listen\": \"j\", \"timeout\": \"1m\"}", sample{"j", Duration(time.Minute)}, ""},
		{"", sample{}, ""},
	}
	for _, tt := range tests {
		p := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(p, []byte(tt.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		var got sample
		_, err := load(p, &got)
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

type server struct {
	Command []string          `json:"command,omitempty"`
	URL     string            `json:"url,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

type store struct {
	Kind string `json:"kind,omitempty"`
	embedded
}

type embedded struct {
	Endpoints []string `json:"endpoints,omitempty"`
	Prefix    string   `json:"prefix,omitempty"`
	TLS       *tlsConf `json:"tls,omitempty"`
}

type tlsConf struct {
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

type full struct {
	Listen     string            `json:"listen"`
	VerdictTTL Duration          `json:"verdict_ttl,omitempty"`
	Servers    map[string]server `json:"servers"`
	Store      store             `json:"state_store,omitempty"`
	Limits     struct {
		MaxBodyBytes int `json:"max_body_bytes,omitempty"`
	} `json:"limits,omitempty"`
	Tools map[string]struct {
		WhenCase string `json:"when_case,omitempty"`
	} `json:"tools,omitempty"`
	Extra   map[string]any `json:"extra,omitempty"`
	Enabled bool           `json:"enabled,omitempty"`
}

func (f *full) Validate() error {
	var errs []error
	if f.Listen == "" {
		errs = append(errs, errors.New("listen is required"))
	}
	for id, s := range f.Servers {
		if len(s.Command) == 0 && s.URL == "" {
			errs = append(errs, Errorf(Key("servers", id), "neither command nor url is set"))
		}
		for i, a := range s.Command {
			if a == "" {
				errs = append(errs, At(Key("servers", id), Errorf(Index("command", i), "empty")))
			}
		}
	}
	if f.Store.Kind == "etcd" && len(f.Store.Endpoints) == 0 {
		errs = append(errs, Errorf("state_store.endpoints", "at least one endpoint is required"))
	}
	if f.VerdictTTL.D() > 10*time.Minute {
		errs = append(errs, Errorf("verdict_ttl", "%s exceeds 10m", f.VerdictTTL.D()))
	}
	if f.Limits.MaxBodyBytes < 0 {
		errs = append(errs, Place("limits.max_body_bytes", fmt.Errorf("limits.max_body_bytes %d is negative", f.Limits.MaxBodyBytes)))
	}
	return errors.Join(errs...)
}

// Every problem is reported, each at file:line:col with its key path; an unknown key close to a
// known one at its level says which.
func TestLoadValidPlacesEveryProblem(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // the error's lines, after the file name
	}{
		{"ok", "listen: a\nservers: {bank: {command: [bank]}}\n", nil},
		{"a swap at the top", "listen: a\nverdict_tll: 30s\n", []string{
			`:2:1: unknown field "verdict_tll" (did you mean "verdict_ttl"?)`}},
		{"case alone", "Listen: a\n", []string{
			`:1:1: unknown field "Listen" (did you mean "listen"? keys are case-sensitive)`}},
		{"nothing close", "listen: a\nbogus: 1\n", []string{`:2:1: unknown field "bogus"`}},
		{"nested and embedded", "listen: a\nstate_store:\n  kind: etcd\n  endpoints: [http://e:2379]\n  prefx: /x/\n  tls: {cert: c, kye: k}\n", []string{
			`:5:3: state_store: unknown field "prefx" (did you mean "prefix"?)`,
			`:6:18: state_store.tls: unknown field "kye" (did you mean "key"?)`}},
		{"in a map entry", "listen: a\nservers:\n  bank:\n    comand: [x]\n", []string{
			`:4:5: servers.bank: unknown field "comand" (did you mean "command"?)`}},
		{"a key that is no identifier", "listen: a\ntools:\n  bank/transfer: {when_cas: immediate}\n", []string{
			`:3:19: tools["bank/transfer"]: unknown field "when_cas" (did you mean "when_case"?)`}},
		{"free-form stays free", "listen: a\nextra: {anything: [1, {goes: true}]}\n", nil},
		{"types", "listen: [a]\nlimits: {max_body_bytes: lots}\nservers: {bank: {command: x}}\nenabled: maybe\nverdict_ttl: 30\n", []string{
			`:1:9: listen: want a string, got a list`,
			`:2:26: limits.max_body_bytes: want a whole number, got "lots"`,
			`:3:27: servers.bank.command: want a list, got "x"`,
			`:4:10: enabled: want true or false, got "maybe"`,
			`:5:14: verdict_ttl: duration must be a string such as "30s", got 30`}},
		{"yaml 1.1 scalars as converted", "listen: 0x1F\nenabled: on\n", []string{
			`:1:9: listen: want a string, got 31`}},
		{"duplicates at any depth", "listen: a\nservers:\n  bank: {url: u, url: v}\n", []string{
			`:3:18: servers.bank: key "url" already set at line 3`}},
		{"not a mapping at all", "- listen\n", []string{`:1:1: want a mapping, got a list`}},
		{"syntax", "listen: a\nservers: [a, b\nx: 1\n", []string{`:2: did not find expected ',' or ']'`}},
		{"validation with places", "listen: a\nverdict_ttl: 1h\nservers:\n  bank: {}\n  fs:\n    command: [x, \"\"]\nstate_store: {kind: etcd}\n", []string{
			`:4:3: servers.bank: neither command nor url is set`,
			`:6:18: servers.fs.command[1]: empty`,
			`:7:1: state_store.endpoints: at least one endpoint is required`,
			`:2:1: verdict_ttl: 1h0m0s exceeds 10m`}},
		{"a message that names its key", "listen: a\nlimits:\n  max_body_bytes: -1\n", []string{
			`:3:3: limits.max_body_bytes -1 is negative`}},
		{"a missing key has no place", "servers: {bank: {url: u}}\n", []string{`: listen is required`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(p, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadValid[full](p)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			got := strings.Split(err.Error(), "\n")
			var want []string
			for _, w := range tt.want {
				want = append(want, p+w)
			}
			// Validate's map order is random; the decode's problems come in document order.
			if tt.name == "validation with places" {
				slices.Sort(got)
				slices.Sort(want)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.File != p {
				t.Fatalf("not a *confx.Error: %T", err)
			}
		})
	}
}

// Callers branch on the error's type, never on its text.
func TestErrorTypes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte("Listen: a\nverdict_tll: 1s\n"), 0o600)
	_, err := LoadValid[full](p)
	var uf *UnknownFieldError
	if !errors.As(err, &uf) || uf.Name != "Listen" || uf.Suggestion != "listen" {
		t.Fatalf("%v: want an *UnknownFieldError for Listen", err)
	}
	if !errors.Is(err, ErrKeyCase) {
		t.Fatalf("%v: a key differing in case alone must match ErrKeyCase", err)
	}
	if pe := At("a", At("b[1]", fmt.Errorf("x"))); pe.Error() != "a.b[1]: x" {
		t.Fatalf("At: %v", pe)
	}
	if pe := At("a", Errorf("[2]", "y")); pe.Error() != "a[2]: y" {
		t.Fatalf("At: %v", pe)
	}
	if pe := At("a", Place("b", fmt.Errorf("b is bad"))); pe.Error() != "b is bad" || pe.(*PathError).Path != "a.b" {
		t.Fatalf("At of Place: %v", pe)
	}
	if At("a", nil) != nil || Place("a", nil) != nil {
		t.Fatal("nil errors must stay nil")
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
	if _, err := LoadValid[validated](bad); err == nil || err.Error() != bad+": listen is required" {
		t.Fatalf("bad: %v", err)
	}
	if _, err := LoadValid[validated](filepath.Join(dir, "none.yaml")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestAtPlacesJoinedProblemsOneByOne: a section's Validate returns its problems joined; each
// stays a problem of its own under the section's key.
func TestAtPlacesJoinedProblemsOneByOne(t *testing.T) {
	err := At("identity", errors.Join(Errorf("issuers[0].issuer", "is required"), Errorf("issuers[1].audience", "bad")))
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || len(j.Unwrap()) != 2 {
		t.Fatalf("At = %v, want two problems", err)
	}
	var paths []string
	for _, e := range j.Unwrap() {
		var pe *PathError
		if !errors.As(e, &pe) {
			t.Fatalf("%v is not a *PathError", e)
		}
		paths = append(paths, pe.Path)
	}
	if want := []string{"identity.issuers[0].issuer", "identity.issuers[1].audience"}; !slices.Equal(paths, want) {
		t.Errorf("paths %v, want %v", paths, want)
	}
}

// TestLoadKeepsExactNumbers: a value of type any (pre-set data) keeps a number's exact text,
// so that one no float64 holds reaches whoever uses it as written, to be refused there, never
// rounded to a neighbour.
func TestLoadKeepsExactNumbers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte("values: {account: 12345678901234567, list: [0.1, 2]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Values map[string]any `json:"values"`
	}
	if _, err := load(p, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"account": json.Number("12345678901234567"), "list": []any{json.Number("0.1"), json.Number("2")}}
	if !reflect.DeepEqual(got.Values, want) {
		t.Fatalf("values = %#v, want %#v", got.Values, want)
	}
}

func TestDaemonKeys(t *testing.T) {
	tests := []struct {
		name string
		errs []error
		want string // "" for none
	}{
		{"admin token unset", AdminToken(""), ""},
		{"admin token a hash", AdminToken(strings.Repeat("ab", 32)), ""},
		{"admin token not a hash", AdminToken("secret"), "admin_token_sha256: "},
		{"debug_listen unset", DebugListen(""), ""},
		{"debug_listen on loopback", DebugListen("127.0.0.1:6060"), ""},
		{"debug_listen public", DebugListen("0.0.0.0:6060"), `debug_listen "0.0.0.0:6060": only a loopback address is allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == "" {
				if len(tt.errs) != 0 {
					t.Fatalf("errors %v, want none", tt.errs)
				}
				return
			}
			if len(tt.errs) != 1 || !strings.HasPrefix(tt.errs[0].Error(), tt.want) {
				t.Fatalf("errors %v, want one starting %q", tt.errs, tt.want)
			}
		})
	}
}
