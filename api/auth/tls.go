package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
)

// TLSFiles names the PEM files that turn on TLS and, with ClientCA, mutual
// TLS. The zero value means plain HTTP.
type TLSFiles struct {
	// Cert is the server certificate chain (PEM).
	Cert string
	// Key is the server private key (PEM).
	Key string
	// ClientCA, when set, is a PEM bundle of CAs; clients must present a
	// certificate signed by one of them.
	ClientCA string
}

// Enabled reports whether any TLS file is set.
func (f TLSFiles) Enabled() bool { return f.Cert != "" || f.Key != "" || f.ClientCA != "" }

// Config loads the files into a server tls.Config (TLS 1.2 or later).
// Cert and Key must be given together; ClientCA needs both.
func (f TLSFiles) Config() (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("load tls: --tls-cert and --tls-key must be given together (and --tls-client-ca needs both)")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("load tls key pair %s, %s: %w", f.Cert, f.Key, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("read tls client ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("read tls client ca %s: no PEM certificate found", f.ClientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ErrInsecureExposure is returned by CheckExposure when a server would
// accept unauthenticated requests from beyond this machine.
var ErrInsecureExposure = errors.New("refusing to serve without authentication on a non-loopback address")

// CheckExposure refuses to listen on a non-loopback addr without
// authentication (authOn false) unless insecureNoAuth is set. An empty host
// (":8080") listens on every interface and so is not loopback.
func CheckExposure(addr string, authOn, insecureNoAuth bool) error {
	if authOn || insecureNoAuth || IsLoopback(addr) {
		return nil
	}
	return fmt.Errorf("%w %q: give --tokens FILE, listen on 127.0.0.1, or pass --insecure-no-auth", ErrInsecureExposure, addr)
}

// IsLoopback reports whether addr ("host:port") names only the loopback
// interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
