package e2e

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A corpusCase is one hostile request of testdata/adversarial. See the README there for the
// format.
type corpusCase struct {
	file string
	line int
	name string

	method      string
	path        string
	auth        string // caller (default), admin, none, wrong
	contentType string
	args        string // template of the arguments the {{verdict}} placeholder signs
	header      string // template of the protected header of {{token}}
	claims      string // template of the payload of {{token}}
	sign        string // how {{token}} is signed
	timeout     time.Duration
	expect      expectation
	body        string // template
}

// expectation is the answer a case must get.
type expectation struct {
	statuses []statusSpec // alternatives
	codes    []string     // acceptable error codes; empty means any
	// outcome constraints for verdictd's 200 decision records: a "!" prefix negates.
	outcomes []string
}

// statusSpec is an exact status, or with status 0 any status of class (2 for 2xx, 4 for 4xx).
type statusSpec struct{ status, class int }

func (e expectation) String() string {
	var alts []string
	for _, s := range e.statuses {
		if s.status == 0 {
			alts = append(alts, fmt.Sprintf("%dxx", s.class))
		} else {
			alts = append(alts, fmt.Sprint(s.status))
		}
	}
	str := strings.Join(alts, "|")
	if len(e.codes) > 0 {
		str += " " + strings.Join(e.codes, "|")
	}
	return str
}

// matches reports whether an answer meets the expectation (outcomes are checked by the runner).
// Error codes are checked on error statuses only.
func (e expectation) matches(status int, code string) bool {
	ok := false
	for _, s := range e.statuses {
		ok = ok || s.status == status || s.status == 0 && status/100 == s.class
	}
	return ok && (status < 400 || len(e.codes) == 0 || slices.Contains(e.codes, code))
}

func parseExpectation(s string) (expectation, error) {
	var e expectation
	f := strings.Fields(s)
	if len(f) == 0 || len(f) > 2 {
		return e, fmt.Errorf("expect %q: want STATUS[|STATUS...] [CODE|CODE...]", s)
	}
	for _, alt := range strings.Split(f[0], "|") {
		switch {
		case len(alt) == 3 && strings.HasSuffix(alt, "xx") && (alt[0] == '2' || alt[0] == '4'):
			e.statuses = append(e.statuses, statusSpec{class: int(alt[0] - '0')})
		default:
			n, err := strconv.Atoi(alt)
			if err != nil || n < 200 || n > 499 {
				return e, fmt.Errorf("expect %q: want a status 200-499, 2xx or 4xx", alt)
			}
			e.statuses = append(e.statuses, statusSpec{status: n})
		}
	}
	if len(f) > 1 {
		e.codes = strings.Split(f[1], "|")
	}
	return e, nil
}

// loadCorpus reads every *.cases file of dir.
func loadCorpus(dir string) ([]*corpusCase, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.cases"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.cases files in %s", dir)
	}
	var all []*corpusCase
	names := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		cs, err := parseCases(filepath.Base(f), b)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if prev, dup := names[c.name]; dup {
				return nil, fmt.Errorf("%s:%d: case %q already defined in %s", c.file, c.line, c.name, prev)
			}
			names[c.name] = c.file
		}
		all = append(all, cs...)
	}
	return all, nil
}

// parseCases parses one corpus file: cases start with a line "=== name", then "key: value"
// lines, then a line "---", then the body template up to the next "===" line or the end of the
// file, without its final line break. Lines starting with "#" before a body are comments.
func parseCases(file string, data []byte) ([]*corpusCase, error) {
	var (
		cases  []*corpusCase
		cur    *corpusCase
		inBody bool
		body   []string
		lineNo int
	)
	finish := func() error {
		if cur == nil {
			return nil
		}
		if !inBody {
			return fmt.Errorf("%s:%d: case %q has no --- line before its body", file, cur.line, cur.name)
		}
		cur.body = strings.Join(body, "\n")
		if len(cur.expect.statuses) == 0 {
			return fmt.Errorf("%s:%d: case %q has no expect", file, cur.line, cur.name)
		}
		cases = append(cases, cur)
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "=== "); ok {
			if err := finish(); err != nil {
				return nil, err
			}
			cur = &corpusCase{file: file, line: lineNo, name: strings.TrimSpace(name), method: "POST", auth: "caller",
				sign: "trusted", timeout: 10 * time.Second, contentType: "application/json"}
			inBody, body = false, nil
			continue
		}
		switch {
		case cur == nil:
			if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
				return nil, fmt.Errorf("%s:%d: text before the first === line", file, lineNo)
			}
		case inBody:
			body = append(body, line)
		case line == "---":
			inBody = true
		case strings.HasPrefix(line, "#"), strings.TrimSpace(line) == "":
		default:
			key, val, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("%s:%d: want key: value", file, lineNo)
			}
			val = strings.TrimSpace(val)
			if err := cur.set(strings.TrimSpace(key), val); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", file, lineNo, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return cases, nil
}

func (c *corpusCase) set(key, val string) error {
	switch key {
	case "method":
		c.method = val
	case "path":
		c.path = val
	case "auth":
		if !slices.Contains([]string{"caller", "admin", "none", "wrong"}, val) {
			return fmt.Errorf("auth %q: want caller, admin, none or wrong", val)
		}
		c.auth = val
	case "content-type":
		c.contentType = val
	case "args":
		c.args = val
	case "header":
		c.header = val
	case "claims":
		c.claims = val
	case "sign":
		if _, ok := signers[val]; !ok {
			return fmt.Errorf("sign %q: unknown", val)
		}
		c.sign = val
	case "timeout":
		d, err := time.ParseDuration(val)
		if err != nil {
			return err
		}
		c.timeout = d
	case "expect":
		e, err := parseExpectation(val)
		if err != nil {
			return err
		}
		c.expect.statuses, c.expect.codes = e.statuses, e.codes
	case "outcome":
		c.expect.outcomes = append(c.expect.outcomes, strings.Fields(val)...)
	case "bug":
		// Once a key that turned a missed expectation into a skip; see README.
		return errors.New("bug: there is no known-defect marker; a case the daemon misses fails the corpus")
	default:
		return fmt.Errorf("unknown key %q", key)
	}
	return nil
}

// forge holds what a corpus runner needs to fill in placeholders and forge tokens.
type forge struct {
	trusted   *issuer
	untrusted ed25519.PrivateKey
	es256     *ecdsa.PrivateKey
	jwksBytes []byte // the trusted JWKS file, byte for byte
	// verdict signs a valid verdict over args (a JSON text) and returns it.
	verdict func(args string) (string, error)
}

// signers sign a token's signing input (base64url header "." base64url payload).
var signers = map[string]func(f *forge, input []byte) ([]byte, error){
	"trusted": func(f *forge, in []byte) ([]byte, error) { return ed25519.Sign(f.trusted.priv, in), nil },
	// untrusted: a key no issuer lists.
	"untrusted": func(f *forge, in []byte) ([]byte, error) { return ed25519.Sign(f.untrusted, in), nil },
	// none: an empty signature, as alg "none" has.
	"none": func(*forge, []byte) ([]byte, error) { return nil, nil },
	// hs256-*: HMAC keyed with public material, the classic algorithm confusion.
	"hs256-pubkey": func(f *forge, in []byte) ([]byte, error) {
		return hmacSHA256(f.trusted.priv.Public().(ed25519.PublicKey), in), nil
	},
	"hs256-jwks": func(f *forge, in []byte) ([]byte, error) { return hmacSHA256(f.jwksBytes, in), nil },
	"hs256-pem": func(f *forge, in []byte) ([]byte, error) {
		der, err := x509.MarshalPKIXPublicKey(f.trusted.priv.Public())
		if err != nil {
			return nil, err
		}
		return hmacSHA256(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), in), nil
	},
	"es256-untrusted": func(f *forge, in []byte) ([]byte, error) {
		h := sha256.Sum256(in)
		r, s, err := ecdsa.Sign(rand.Reader, f.es256, h[:])
		if err != nil {
			return nil, err
		}
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		return sig, nil
	},
	// garbage: 64 random bytes, the length of a real signature.
	"garbage": func(*forge, []byte) ([]byte, error) {
		b := make([]byte, 64)
		_, err := rand.Read(b)
		return b, err
	},
}

func hmacSHA256(key, in []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(in)
	return m.Sum(nil)
}

func newForge(trusted *issuer) (*forge, error) {
	_, untrusted, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	es, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	jwks, err := os.ReadFile(trusted.jwks)
	if err != nil {
		return nil, err
	}
	return &forge{trusted: trusted, untrusted: untrusted, es256: es, jwksBytes: jwks}, nil
}

// expand fills in the placeholders of a template: {{name}} from vars, {{bytes:HEX}} raw bytes,
// {{repeat:N:TEXT}} TEXT N times, {{b64:TEXT}} base64url of TEXT, {{verdict}} a valid verdict
// over the case's arguments, {{token}} the case's forged token.
func (f *forge) expand(tmpl string, c *corpusCase, vars map[string]string) (string, error) {
	var out strings.Builder
	for {
		i := strings.Index(tmpl, "{{")
		if i < 0 {
			out.WriteString(tmpl)
			return out.String(), nil
		}
		out.WriteString(tmpl[:i])
		ph, rest, ok := cutPlaceholder(tmpl[i+2:])
		if !ok {
			return "", fmt.Errorf("unclosed {{ in %.40q", tmpl[i:])
		}
		tmpl = rest
		v, err := f.placeholder(ph, c, vars)
		if err != nil {
			return "", err
		}
		out.WriteString(v)
	}
}

// cutPlaceholder splits s, the text after a "{{", at its closing "}}". Inside a placeholder
// "\}" stands for "}" and "\\" for "\", so that a repeated text can hold braces.
func cutPlaceholder(s string) (ph, rest string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && (s[i+1] == '}' || s[i+1] == '\\'):
			b.WriteByte(s[i+1])
			i++
		case strings.HasPrefix(s[i:], "}}"):
			return b.String(), s[i+2:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}

func (f *forge) placeholder(ph string, c *corpusCase, vars map[string]string) (string, error) {
	name, arg, _ := strings.Cut(ph, ":")
	switch name {
	case "bytes":
		b, err := hex.DecodeString(strings.ReplaceAll(arg, " ", ""))
		return string(b), err
	case "repeat":
		ns, text, ok := strings.Cut(arg, ":")
		n, err := strconv.Atoi(ns)
		if !ok || err != nil || n < 0 || n*len(text) > 64<<20 {
			return "", fmt.Errorf("bad {{repeat:%s}}", arg)
		}
		return strings.Repeat(text, n), nil
	case "b64":
		return base64.RawURLEncoding.EncodeToString([]byte(arg)), nil
	case "verdict":
		return f.verdict(vars["args"])
	case "token":
		return f.token(c, vars)
	}
	if v, ok := vars[name]; ok {
		return v, nil
	}
	return "", fmt.Errorf("unknown placeholder {{%s}}", ph)
}

// token forges the case's token: its header and claims templates (by default a valid verdict's),
// signed as the case says.
func (f *forge) token(c *corpusCase, vars map[string]string) (string, error) {
	header := c.header
	if header == "" {
		header = `{"alg":"EdDSA","kid":"{{kid}}","typ":"verdict+jwt"}`
	}
	claims := c.claims
	if claims == "" {
		claims = "{{claims}}"
	}
	h, err := f.expand(header, c, vars)
	if err != nil {
		return "", err
	}
	p, err := f.expand(claims, c, vars)
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString([]byte(h)) + "." + base64.RawURLEncoding.EncodeToString([]byte(p))
	sig, err := signers[c.sign](f, []byte(input))
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// TestParseCasesRefuses: a corpus file that cannot be read as written is an error at its line;
// a case never becomes a skip.
func TestParseCasesRefuses(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"a known-defect line", "=== c\nexpect: 400\nbug: the daemon answers 200\n---\n{}", "x.cases:3: bug: there is no known-defect marker"},
		{"no expect", "=== c\n---\n{}", `x.cases:1: case "c" has no expect`},
		{"an unknown key", "=== c\nexpect: 400\nskip: yes\n---\n{}", `x.cases:3: unknown key "skip"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseCases("x.cases", []byte(tt.file))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
