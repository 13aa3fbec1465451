package auth_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"testing"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
)

func TestTLSConfigMutual(t *testing.T) {
	pki := authtest.NewPKI(t)
	cfg, err := auth.TLSFiles{Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: pki.CACert}.Config()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return
				}
				c.Write([]byte(c.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName + "\n"))
			}()
		}
	}()
	dial := func(withCert bool) (string, error) {
		c, err := tls.Dial("tcp", ln.Addr().String(), pki.ClientConfig(t, withCert))
		if err != nil {
			return "", err
		}
		defer c.Close()
		return bufio.NewReader(c).ReadString('\n')
	}
	if got, err := dial(true); err != nil || got != "test-client\n" {
		t.Fatalf("with client cert: %q, %v", got, err)
	}
	if _, err := dial(false); err == nil {
		t.Fatal("handshake without a client certificate succeeded")
	}
}

func TestTLSConfigErrors(t *testing.T) {
	pki := authtest.NewPKI(t)
	tests := []auth.TLSFiles{
		{Cert: pki.ServerCert},
		{ClientCA: pki.CACert},
		{Cert: pki.ServerCert, Key: pki.ClientKey},
		{Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: pki.ServerKey},
		{Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: "/nonexistent"},
	}
	for i, f := range tests {
		if _, err := f.Config(); err == nil {
			t.Errorf("case %d: Config accepted %+v", i, f)
		}
	}
	if (auth.TLSFiles{}).Enabled() {
		t.Error("zero TLSFiles enabled")
	}
}

func TestCheckExposure(t *testing.T) {
	tests := []struct {
		addr             string
		authOn, insecure bool
		ok               bool
	}{
		{"127.0.0.1:8080", false, false, true},
		{"[::1]:8080", false, false, true},
		{"localhost:8080", false, false, true},
		{":8080", false, false, false},
		{"0.0.0.0:8080", false, false, false},
		{"10.1.2.3:8080", false, false, false},
		{"10.1.2.3:8080", true, false, true},
		{"0.0.0.0:8080", false, true, true},
	}
	for _, tc := range tests {
		err := auth.CheckExposure(tc.addr, tc.authOn, tc.insecure)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, auth.ErrInsecureExposure)) {
			t.Errorf("CheckExposure(%q, %v, %v) = %v", tc.addr, tc.authOn, tc.insecure, err)
		}
	}
}
