// Package authtest makes throwaway credentials for tests: a self-signed CA
// with a server and a client certificate, and tokens files.
package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/auth"
)

// PKI is a CA and two certificates signed by it, written as PEM files.
type PKI struct {
	CACert                string // CA certificate
	ServerCert, ServerKey string // for 127.0.0.1, ::1 and localhost
	ClientCert, ClientKey string // client auth, CN "test-client"
	// Pool holds the CA certificate.
	Pool *x509.CertPool
}

// NewPKI generates the PKI in t.TempDir().
func NewPKI(t testing.TB) PKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cachesvc test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("create ca: %v", err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p := PKI{CACert: filepath.Join(dir, "ca.pem"), Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	writePEM(t, p.CACert, "CERTIFICATE", caDER)

	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		k := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatalf("create %s cert: %v", name, err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		c, kp := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, c, "CERTIFICATE", der)
		writePEM(t, kp, "PRIVATE KEY", kder)
		return c, kp
	}
	p.ServerCert, p.ServerKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.ClientCert, p.ClientKey = leaf("test-client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

// ClientConfig returns a client tls.Config trusting the CA, presenting the
// client certificate when withCert is true.
func (p PKI) ClientConfig(t testing.TB, withCert bool) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: p.Pool, MinVersion: tls.VersionTLS12}
	if withCert {
		c, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Token is a test token: its secret, name and scopes.
type Token struct {
	Name, Secret string
	Scopes       string // e.g. "default:write,*:read"
}

// WriteTokens writes a tokens file granting toks (and, if anonymous is not
// empty, anonymous read in those namespaces, comma separated) and returns
// its path.
func WriteTokens(t testing.TB, toks []Token, anonymous string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# written by authtest\n")
	for _, tk := range toks {
		scopes, err := auth.ParseScopes(tk.Scopes)
		if err != nil {
			t.Fatal(err)
		}
		line, err := auth.FormatRule(tk.Name, auth.HashToken(tk.Secret), scopes)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	if anonymous != "" {
		var parts []string
		for _, ns := range strings.Split(anonymous, ",") {
			parts = append(parts, ns+":read")
		}
		b.WriteString("anonymous - " + strings.Join(parts, ",") + "\n")
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
