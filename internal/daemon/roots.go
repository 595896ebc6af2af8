package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	// The release images are built from an empty base: they hold no CA bundle, and a daemon
	// in one would trust no server on the internet (a tool server, an identity provider). The
	// fallback roots are used only when the system has none; a host's own roots win.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/verdictgate/verdict/internal/opfile"
)

// ExtraCAEnv names the environment variable that holds the path of a PEM bundle of certificate
// authorities the daemons trust in addition to the system roots (or, when the system has none,
// the roots built into the binary): the CA of a private tool server, identity provider or of
// the daemons' own TLS. Unlike SSL_CERT_FILE, which replaces the system roots, it adds to them.
const ExtraCAEnv = "VERDICT_EXTRA_CA_FILE"

// ErrExtraCA is the error of an extra CA bundle that cannot be read or holds no certificate.
var ErrExtraCA = errors.New("extra CA bundle")

// RootPool returns the roots the daemons verify servers with: a copy of the system roots (the
// fallback roots built into the binary when the system has none) plus the certificates of the
// PEM file extraFile, if it is not empty. A file that cannot be read or holds no PEM
// certificate is an error naming it: trusting less than the operator asked for would show up
// only as refused connections later.
func RootPool(extraFile string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		return nil, fmt.Errorf("system roots: %w", err)
	}
	if extraFile == "" {
		return pool, nil
	}
	pem, err := opfile.ReadFile(extraFile)
	if err != nil {
		return nil, fmt.Errorf("%w (%s): %w", ErrExtraCA, ExtraCAEnv, err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w (%s): %s holds no PEM certificate", ErrExtraCA, ExtraCAEnv, extraFile)
	}
	return pool, nil
}

// TrustRoots reads the extra CA bundle named by ExtraCAEnv (getenv is os.Getenv) once, at
// start, and makes http.DefaultTransport verify servers with RootPool's roots. Every outbound
// HTTP client the daemons make (tool servers, verdictd, the executor, JWKS and OIDC discovery,
// webhooks, log sinks) uses that transport, so it must run before the service is made. With
// no extra bundle it changes nothing: the transport already uses the system (or fallback)
// roots. It logs the bundle in force.
func TrustRoots(getenv func(string) string, log *slog.Logger) error {
	file := getenv(ExtraCAEnv)
	if file == "" {
		log.Info("tls roots", "extra_ca_file", "none")
		return nil
	}
	pool, err := RootPool(file)
	if err != nil {
		return err
	}
	tr, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return fmt.Errorf("%w: http.DefaultTransport is a %T, not an *http.Transport", ErrExtraCA, http.DefaultTransport)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if tr.TLSClientConfig != nil {
		cfg = tr.TLSClientConfig.Clone()
	}
	cfg.RootCAs = pool
	tr.TLSClientConfig = cfg
	log.Info("tls roots", "extra_ca_file", file)
	return nil
}
