package control

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type certPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func makeCert(t *testing.T, cn string, parent *certPair, isCA bool) *certPair {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: isCA, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &certPair{cert: c, key: key, der: der}
}

func (c *certPair) write(t *testing.T, dir, name string) (string, string) {
	cp, kp := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	os.WriteFile(cp, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.der}), 0o600)
	kb, _ := x509.MarshalECPrivateKey(c.key)
	os.WriteFile(kp, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cp, kp
}

// TestMutualTLS: with a client CA, a client without a certificate from it is refused at the
// handshake; with one (and its token) it is served.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := makeCert(t, "gpupool test CA", nil, true)
	srv := makeCert(t, "127.0.0.1", ca, false)
	cli := makeCert(t, "agent n1", ca, false)
	caFile, _ := ca.write(t, dir, "ca")
	srvCert, srvKey := srv.write(t, dir, "server")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0",
			TLS:   TLSFiles{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: caFile},
			Ready: func(a, s string) { ready <- [2]string{a, s} }}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { cancel(); <-done }()
	var r [2]string
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	get := func(certs []tls.Certificate) (int, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
		req, _ := http.NewRequest("GET", "https://"+r[0]+"/v1/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+r[1])
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get(nil); err == nil {
		t.Fatalf("client without certificate served (%d)", code)
	}
	pair := tls.Certificate{Certificate: [][]byte{cli.der}, PrivateKey: cli.key}
	if code, err := get([]tls.Certificate{pair}); err != nil || code != 200 {
		t.Fatalf("client with certificate: %d %v", code, err)
	}
}
