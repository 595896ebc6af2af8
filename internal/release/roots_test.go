package release

import (
	"bufio"
	"debug/buildinfo"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/keys"
)

// fallbackModule embeds the roots the daemons trust where the system has none, as in the
// images, which are built from an empty base.
const fallbackModule = "golang.org/x/crypto/x509roots/fallback"

// TestReleaseBinariesEmbedRoots checks that every released binary (the one its image holds,
// TestImages) is built with the fallback roots.
func TestReleaseBinariesEmbedRoots(t *testing.T) {
	_, arts := testRelease(t)
	for _, d := range Daemons {
		info, err := buildinfo.ReadFile(artifact(t, arts, "binary", d.Command))
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, dep := range info.Deps {
			found = found || dep.Path == fallbackModule
		}
		if !found {
			t.Errorf("%s is built without %s: in an image it would trust no public server", d.Command, fallbackModule)
		}
	}
}

// TestExtraCAReachesPrivateUpstream runs the released executor as its image would (no system
// roots: SSL_CERT_FILE and SSL_CERT_DIR name nothing) against an https JWKS, which it fetches
// before it listens, served under a private CA. The executor starts when the CA is its extra
// bundle, refuses the server without it, and refuses to start on a bundle it cannot read.
func TestExtraCAReachesPrivateUpstream(t *testing.T) {
	_, arts := testRelease(t)
	bin := artifact(t, arts, "binary", "executor")
	dir := t.TempDir()
	if _, err := keys.Keygen(filepath.Join(dir, "issuer"), jose.EdDSA); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Keygen(filepath.Join(dir, "receipt"), jose.EdDSA); err != nil {
		t.Fatal(err)
	}
	jwks, err := os.ReadFile(filepath.Join(dir, "issuer", "jwks.json"))
	if err != nil {
		t.Fatal(err)
	}
	idp := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwks)
	}))
	idp.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	idp.StartTLS()
	defer idp.Close()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: idp.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "executor.yaml")
	cfg, _ := json.Marshal(map[string]any{
		"listen":          "127.0.0.1:0",
		"data_dir":        filepath.Join(dir, "data"),
		"executor_id":     "executor-bank",
		"trusted_issuers": []map[string]string{{"issuer": "verdictd", "jwks": idp.URL + "/jwks.json"}},
		"receipt_key":     filepath.Join(dir, "receipt", "signing.jwk"),
		"servers":         map[string]any{"bank": map[string]string{"url": "http://127.0.0.1:9/mcp"}},
		"callers":         []map[string]string{{"name": "gate", "token_sha256": strings.Repeat("0", 64)}},
	})
	if err := os.WriteFile(config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	none := filepath.Join(dir, "no-system-roots")
	for _, tc := range []struct {
		name    string
		extra   string // VERDICT_EXTRA_CA_FILE, unset when empty
		listens bool
		want    string // in the start error
	}{
		{"extra bundle", ca, true, ""},
		{"no extra bundle", "", false, "certificate signed by unknown authority"},
		{"missing bundle", filepath.Join(dir, "missing.pem"), false, filepath.Join(dir, "missing.pem")},
		{"not a bundle", config, false, config + " holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, "serve", "--config", config)
			cmd.Env = []string{"SSL_CERT_FILE=" + none, "SSL_CERT_DIR=" + none}
			if tc.extra != "" {
				cmd.Env = append(cmd.Env, "VERDICT_EXTRA_CA_FILE="+tc.extra)
			}
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			// The executor logs "listening" once it serves, or "start" with the error and
			// exits: read its log until one of them.
			var listening bool
			var startErr string
			var lines []string
			sc := bufio.NewScanner(stderr)
			for !listening && startErr == "" && sc.Scan() {
				lines = append(lines, sc.Text())
				var rec struct{ Msg, Error string }
				if json.Unmarshal(sc.Bytes(), &rec) != nil {
					continue
				}
				listening = rec.Msg == "listening"
				if rec.Msg == "start" {
					startErr = rec.Error
				}
			}
			if listening {
				cmd.Process.Signal(syscall.SIGTERM)
			}
			go func() {
				for sc.Scan() {
				}
			}()
			werr := cmd.Wait()
			if listening != tc.listens {
				t.Fatalf("listening = %v, want %v (exit: %v)\n%s", listening, tc.listens, werr, strings.Join(lines, "\n"))
			}
			if listening && werr != nil {
				t.Errorf("after SIGTERM: %v", werr)
			}
			if !tc.listens && (werr == nil || !strings.Contains(startErr, tc.want)) {
				t.Errorf("start error %q (exit %v), want one saying %q", startErr, werr, tc.want)
			}
		})
	}
}
