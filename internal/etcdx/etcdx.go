// Package etcdx owns how the daemons connect to etcd: the etcd keys both configs share (Config,
// with its TLS block), the endpoint rules, the client with keep-alive probes, and the cache of
// leases their keys are written under (Leases). What each daemon keeps in etcd is its own
// package's business (nonce, convstate).
package etcdx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/opfile"
)

// DefaultDialTimeout bounds fetching an auth token when the client is made.
const DefaultDialTimeout = 5 * time.Second

// TLS are the PEM files of a TLS connection to etcd: ca verifies the servers (system roots when
// empty); cert and key are the client certificate, if etcd asks for one.
type TLS struct {
	Cert       string `json:"cert,omitempty"`
	Key        string `json:"key,omitempty"`
	CA         string `json:"ca,omitempty"`
	ServerName string `json:"server_name,omitempty"`
}

// Config loads the files into a client TLS configuration.
func (t *TLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if (t.Cert == "") != (t.Key == "") {
		return nil, errors.New("etcd tls: cert and key go together")
	}
	if t.Cert != "" {
		cert, err := opfile.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("etcd tls: load key pair: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if t.CA != "" {
		pem, err := opfile.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("etcd tls: read ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd tls: ca %s holds no PEM certificate", t.CA)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// CheckEndpoints checks the endpoints without connecting. Every endpoint is an http:// or
// https:// URL with a host and nothing else, all with the same scheme: the etcd client picks
// the transport security of the first endpoint for all of them, so a mix would send some
// requests in clear. TLS with http:// endpoints is refused for the same reason (it would be
// ignored).
func CheckEndpoints(endpoints []string, t *TLS) error {
	if len(endpoints) == 0 {
		return errors.New("etcd: at least one endpoint is required")
	}
	var scheme string
	for _, ep := range endpoints {
		u, err := url.Parse(ep)
		switch {
		case err != nil:
			return fmt.Errorf("etcd: endpoint %q: want an http:// or https:// URL: %w", ep, err)
		case u.Scheme != "http" && u.Scheme != "https":
			return fmt.Errorf("etcd: endpoint %q: want an http:// or https:// URL", ep)
		case u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
			return fmt.Errorf("etcd: endpoint %q: want scheme://host:port and nothing else", ep)
		case scheme != "" && u.Scheme != scheme:
			return errors.New("etcd: endpoints mix http and https: the client would use one transport for all")
		}
		scheme = u.Scheme
	}
	if t != nil && scheme == "http" {
		return errors.New("etcd: tls is set but the endpoints are http://; use https:// endpoints")
	}
	return nil
}

// Conn says how to reach a cluster.
type Conn struct {
	Endpoints []string
	TLS       *TLS
	// Username and Password authenticate with etcd's own auth; both or neither.
	Username, Password string
	// DialTimeout bounds fetching an auth token. Zero means DefaultDialTimeout. Connections are
	// otherwise made lazily: the client is returned with every endpoint down, and requests fail
	// until one answers.
	DialTimeout time.Duration
}

// Validate checks c without connecting or reading files.
func (c Conn) Validate() error {
	if err := CheckEndpoints(c.Endpoints, c.TLS); err != nil {
		return err
	}
	if (c.Username == "") != (c.Password == "") {
		return errors.New("etcd: username and password go together")
	}
	return nil
}

// Client checks c and returns a client. The client outlives ctx's cancellation (it is closed
// with Close), and probes idle connections so a cluster that went away is noticed before a
// request waits out its whole timeout on a dead connection.
func Client(ctx context.Context, c Conn) (*clientv3.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cfg := clientv3.Config{
		Endpoints:            c.Endpoints,
		DialTimeout:          c.DialTimeout,
		Username:             c.Username,
		Password:             c.Password,
		Context:              context.WithoutCancel(ctx),
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		// gRPC's default reconnect backoff grows to two minutes: after a long etcd outage the
		// daemons would keep refusing (fail closed) long after etcd is back. Cap it at 2s.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		})},
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if c.TLS != nil {
		tc, err := c.TLS.Config()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: connect %v: %w", c.Endpoints, err)
	}
	return cli, nil
}

// CheckCredentialFiles reports the pairing problems of a config section's etcd credentials, named
// after section: username without password_file (or the reverse), and a client certificate
// without its key (or the reverse). The files themselves are read at start.
func CheckCredentialFiles(section, username, passwordFile string, t *TLS) []error {
	var errs []error
	if (username == "") != (passwordFile == "") {
		errs = append(errs, confx.Place(section, fmt.Errorf("%s: username and password_file go together", section)))
	}
	if t != nil && (t.Cert == "") != (t.Key == "") {
		errs = append(errs, confx.Place(confx.Key(section, "tls"), fmt.Errorf("%s.tls: cert and key go together", section)))
	}
	return errs
}

// Close closes a store's client, once when closed is not nil: closed marks the store closed, and
// a later call does nothing. A close that ends requests in flight is no error; another is
// named by what, the store ("nonce: etcd").
func Close(cli *clientv3.Client, closed *atomic.Bool, what string) error {
	if closed != nil && closed.Swap(true) {
		return nil
	}
	if err := cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: close: %w", what, err)
	}
	return nil
}
