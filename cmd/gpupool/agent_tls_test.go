package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/control"
)

// testCert writes a certificate for 127.0.0.1 signed by parent (self-signed when nil) as
// DIR/NAME.crt and DIR/NAME.key.
func testCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: parent == nil, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	must(t, err)
	c, err := x509.ParseCertificate(der)
	must(t, err)
	cp, kp := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	must(t, os.WriteFile(cp, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	kb, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	must(t, os.WriteFile(kp, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return c, key, cp, kp
}

// TestAgentMutualTLS: against a control plane that requires client certificates, the agent
// registers with --server-ca, --client-cert and --client-key.
func TestAgentMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey, caPath, _ := testCert(t, dir, "ca", nil, nil)
	_, _, srvCert, srvKey := testCert(t, dir, "server", ca, caKey)
	_, _, cliCert, cliKey := testCert(t, dir, "agent", ca, caKey)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	o := control.Options{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0",
		TLS:   control.TLSFiles{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: caPath},
		Ready: func(addr, secret string) { ready <- [2]string{"https://" + addr, secret} }}
	go func() { done <- control.Run(ctx, o, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() { cancel(); <-done })
	var url, op string
	select {
	case r := <-ready:
		url, op = r[0], r[1]
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	cfg := filepath.Join(dir, "agent.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("node: tls-a\nstateDir: %s\nlisten: 127.0.0.1:0\npollInterval: 100ms\ngpus: []\n", filepath.Join(dir, "state"))), 0o644))
	actx, stop := context.WithCancel(context.Background())
	out := &syncBuffer{}
	adone := make(chan error, 1)
	go func() {
		adone <- run(actx, []string{"agent", "--fake", "--config", cfg, "--server", url, "--token", op,
			"--server-ca", caPath, "--client-cert", cliCert, "--client-key", cliKey}, out, out)
	}()
	t.Cleanup(func() { stop(); <-adone })
	tcfg, err := controlLink{ca: caPath, cert: cliCert, key: cliKey}.tlsConfig()
	must(t, err)
	c := &client{base: url, token: op, http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tcfg}}}
	waitFor(t, 20*time.Second, out, "the node to register over mutual TLS", func() bool {
		var ns []control.Node
		return c.call(context.Background(), "GET", "/v1/nodes", nil, &ns) == nil && len(ns) == 1 && len(ns[0].Inventory.GPUs) == 8
	})
}
