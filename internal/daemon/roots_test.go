package daemon

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// privateCA starts a TLS server whose certificate no public root signed and returns the
// server and its certificate as a PEM file.
func privateCA(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewTLSServer(nil)
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "extra.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(file, block, 0o644); err != nil {
		t.Fatal(err)
	}
	return srv, file
}

func TestRootPoolErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, file string }{
		{"missing", filepath.Join(dir, "missing.pem")},
		{"no certificate", notPEM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RootPool(tc.file)
			if !errors.Is(err, ErrExtraCA) {
				t.Fatalf("RootPool(%s) = %v, want ErrExtraCA", tc.file, err)
			}
			if !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), ExtraCAEnv) {
				t.Errorf("error %q names neither the file nor %s", err, ExtraCAEnv)
			}
			var log bytes.Buffer
			getenv := func(k string) string {
				if k == ExtraCAEnv {
					return tc.file
				}
				return ""
			}
			if err := TrustRoots(getenv, slog.New(slog.NewJSONHandler(&log, nil))); !errors.Is(err, ErrExtraCA) {
				t.Errorf("TrustRoots = %v, want ErrExtraCA", err)
			}
		})
	}
}

// TestRootPoolAddsToRoots checks that the extra bundle adds to the roots: the pool verifies
// the private server and still holds the roots it had. It runs itself again in a process that
// sees no system roots (SSL_CERT_FILE and SSL_CERT_DIR name nothing), as in the release
// images, where the roots are the fallback roots built into the binary.
func TestRootPoolAddsToRoots(t *testing.T) {
	const child = "VERDICT_TEST_ROOTS_CHILD"
	if os.Getenv(child) == "" {
		empty := filepath.Join(t.TempDir(), "none")
		cmd := exec.Command(os.Args[0], "-test.run=^TestRootPoolAddsToRoots$", "-test.count=1")
		cmd.Env = append(os.Environ(), child+"=1", "SSL_CERT_FILE="+empty, "SSL_CERT_DIR="+empty)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("without system roots: %v\n%s", err, out)
		}
	}

	srv, file := privateCA(t)
	base, err := RootPool("")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := RootPool(file)
	if err != nil {
		t.Fatal(err)
	}
	leaf := srv.Certificate()
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: base, DNSName: "127.0.0.1"}); err == nil {
		t.Fatal("the private server verifies without the extra bundle: the test proves nothing")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("with the extra bundle: %v", err)
	}

	// Every root the process had is still there. Without system roots they are the fallback
	// roots, which must then be present: a root verifies as its own chain.
	var checked int
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		cert, err := x509.ParseCertificate(r.Certificate)
		if err != nil {
			t.Fatal(err)
		}
		at := cert.NotBefore.Add(time.Hour)
		opts := func(p *x509.CertPool) x509.VerifyOptions {
			return x509.VerifyOptions{Roots: p, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
		}
		_, inBase := cert.Verify(opts(base))
		if os.Getenv(child) != "" && inBase != nil {
			t.Errorf("fallback root %s is not among the roots of a system without any: %v", cert.Subject, inBase)
		}
		if _, err := cert.Verify(opts(pool)); (err == nil) != (inBase == nil) {
			t.Errorf("root %s: verifies %v without the extra bundle, %v with it", cert.Subject, inBase == nil, err == nil)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("the fallback bundle holds no unconstrained root")
	}
}
