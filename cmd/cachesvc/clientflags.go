package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/stats/report"
)

// defaultURL is where the client commands look for the server: the URL of
// `cachesvc serve` with its default --addr, 127.0.0.1:8080.
const defaultURL = "http://127.0.0.1:8080"

// clientFlags are the flags of the commands that talk to a server (stats,
// warm, agent, admin): --url, --namespace, --token, --token-file,
// --client-cert, --client-key. They and their environment variables
// (CACHESVC_URL, CACHESVC_NAMESPACE, CACHESVC_TOKEN, CACHESVC_TOKEN_FILE,
// CACHESVC_CLIENT_CERT, CACHESVC_CLIENT_KEY) are the ones the Python client
// reads; --server and --ns (CACHESVC_SERVER, CACHESVC_NS) are kept as
// aliases.
type clientFlags struct {
	Server string
	NS     string
	token  *tokenSource
	// certFile and keyFile are --client-cert and --client-key: the client
	// certificate for a server with --tls-client-ca (mutual TLS).
	certFile, keyFile string
	// stall is --stall-timeout where registerStall defined it (warm,
	// agent); 0 waits on a hung server forever.
	stall time.Duration
}

// register defines the flags on fs; nsDefault is --namespace's default
// ("" for a command where no namespace means all of them).
func (c *clientFlags) register(fs *flag.FlagSet, nsDefault, nsUsage string) {
	fs.StringVar(&c.Server, "url", defaultURL, "cachesvc server `URL`")
	aliasFlag(fs, "server", "url")
	fs.StringVar(&c.NS, "namespace", nsDefault, nsUsage)
	aliasFlag(fs, "ns", "namespace")
	c.token = addTokenFlags(fs) // security.go
	fs.StringVar(&c.certFile, "client-cert", "", "client certificate `file` (PEM) to present to a server that requires one (serve --tls-client-ca); needs --client-key")
	fs.StringVar(&c.keyFile, "client-key", "", "private key `file` (PEM) of --client-cert (the same file when it holds both)")
}

// tlsConfig returns the TLS configuration presenting --client-cert, or nil
// when none is given. One of --client-cert and --client-key without the
// other is a usage error; a pair that does not load is an error naming
// the files.
func (c *clientFlags) tlsConfig() (*tls.Config, error) {
	if c.certFile == "" && c.keyFile == "" {
		return nil, nil
	}
	if c.certFile == "" || c.keyFile == "" {
		return nil, usagef("give --client-cert and --client-key together (or CACHESVC_CLIENT_CERT and CACHESVC_CLIENT_KEY; the same file for both when it holds the certificate and the key)")
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("load client certificate --client-cert %s and --client-key %s: %w", c.certFile, c.keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}}, nil
}

// httpClient returns the HTTP client of a command that sends its requests
// itself (stats): http.DefaultClient, or a copy of its transport that
// presents --client-cert.
func (c *clientFlags) httpClient() (*http.Client, error) {
	tc, err := c.tlsConfig()
	if err != nil || tc == nil {
		return http.DefaultClient, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Transport: tr}, nil
}

// defaultStallTimeout is --stall-timeout's default: far above any pause of
// a working server (its own --read-timeout and --write-timeout are 30s),
// short enough that a job's warm step does not hang on a hung one.
const defaultStallTimeout = time.Minute

// registerStall defines --stall-timeout, for the commands that run
// unattended in a job's start (warm, agent).
func (c *clientFlags) registerStall(fs *flag.FlagSet) {
	durationVar(fs, &c.stall, "stall-timeout", defaultStallTimeout, 0, noLimitOrMore,
		"give up on a request once its connection moved no byte for this long: a hung server (0 = wait forever)")
}

// client returns a client for the flags, tagging requests with run if set.
func (c *clientFlags) client(run string) (*client.Client, error) {
	if err := c.checkNamespace(); err != nil {
		return nil, err
	}
	if run != "" {
		if err := manifest.ValidateRun(run); err != nil {
			return nil, usagef("%s", err)
		}
	}
	return c.connect(client.Config{Run: run, StallTimeout: c.stall})
}

// checkNamespace checks --namespace.
func (c *clientFlags) checkNamespace() error {
	if err := cachekey.ValidateNamespace(c.NS); err != nil {
		return usagef("--namespace: %s", err)
	}
	return nil
}

// connect checks --url, resolves the token and the client certificate and
// returns a client with cfg plus them: the part of client that admin
// shares, whose namespace may be none (--all-namespaces) and whose requests
// say they come from it.
func (c *clientFlags) connect(cfg client.Config) (*client.Client, error) {
	if err := c.checkURL(); err != nil {
		return nil, err
	}
	token, err := c.token.resolve()
	if err != nil {
		return nil, err
	}
	if cfg.TLS, err = c.tlsConfig(); err != nil {
		return nil, err
	}
	cfg.BaseURL, cfg.Token = c.Server, token
	cl, err := client.New(cfg)
	if err != nil {
		return nil, usagef("--url: %s", err)
	}
	return cl, nil
}

// checkURL checks --url: a usage error names the flag before any request.
func (c *clientFlags) checkURL() error {
	if c.Server == "" {
		return usagef("--url is empty: give the server's URL, e.g. --url %s", defaultURL)
	}
	if _, err := client.ParseBaseURL(c.Server); err != nil {
		return usagef("--url: %s", err)
	}
	return nil
}

// unauthorizedHint is what serverHint adds to a 401: the server's own
// message ("send Authorization: Bearer <token>") is for HTTP clients.
const unauthorizedHint = "(the server wants a token its --tokens file lists: give --token-file FILE or CACHESVC_TOKEN_FILE (or --token, CACHESVC_TOKEN); 'cachesvc token new' makes one)"

// serverHint adds what to do to err when the server at url could not be
// reached at all (nothing listens there, or no such host), was not trusted,
// refused the TLS handshake for want of a client certificate, or wanted a
// token it knows (401).
func serverHint(err error, url string) error {
	var dns *net.DNSError
	var ca x509.UnknownAuthorityError
	var ce *client.Error
	var se *report.StatusError
	switch {
	case errors.As(err, &ce) && ce.Status == http.StatusUnauthorized,
		errors.As(err, &se) && se.Status == http.StatusUnauthorized:
		return fmt.Errorf("%w %s", err, unauthorizedHint)
	case errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dns):
		return fmt.Errorf("%w (is cachesvc serve running at %s? Set --url or CACHESVC_URL to the server's URL)", err, url)
	case errors.As(err, &ca):
		return fmt.Errorf("%w (trust the CA that signed the server's --tls-cert: SSL_CERT_FILE=ca.pem, or install it in the system's store)", err)
	case refusedClientCert(err):
		return fmt.Errorf("%w (the server requires a client certificate signed by its --tls-client-ca: give --client-cert and --client-key, or CACHESVC_CLIENT_CERT and CACHESVC_CLIENT_KEY)", err)
	}
	return err
}

// refusedClientCert reports whether err is the server's TLS alert that it
// requires a client certificate (TLS 1.3) or rejected the one it got, or
// none (TLS 1.2). crypto/tls does not export the alert's type, so its text
// is matched.
func refusedClientCert(err error) bool {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" {
		return false
	}
	msg := op.Err.Error()
	return strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate") ||
		strings.Contains(msg, "unknown certificate authority")
}
