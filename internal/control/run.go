package control

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gpupool.dev/gpupool/internal/store"
)

// Options configure Run.
type Options struct {
	// DataDir holds the store file (state.db), the audit log (audit.log) and, unless TokenFile
	// says otherwise, the operator token (operator.token).
	DataDir string
	// Listen is the address to listen on ("127.0.0.1:8080"; port 0 picks one).
	Listen string
	// TokenFile holds the operator token's secret; it is created (0600) when missing.
	TokenFile string
	Server    ServerConfig
	Loop      LoopConfig
	// TLS, when CertFile is set, serves HTTPS; with ClientCAFile every client must present a
	// certificate signed by that CA (mutual TLS) in addition to its bearer token.
	TLS TLSFiles
	// Ready, when set, is called with the bound address and the operator secret once serving.
	Ready func(addr, operatorSecret string)
}

// Run opens the store, restores the engine, and serves until ctx ends.
func Run(ctx context.Context, o Options, log *slog.Logger) error {
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory %s: %w", o.DataDir, err)
	}
	st, err := store.OpenBolt(filepath.Join(o.DataDir, "state.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	auditFile, err := os.OpenFile(filepath.Join(o.DataDir, "audit.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	defer auditFile.Close()
	audit := slog.New(slog.NewJSONHandler(auditFile, nil))
	loop, err := NewLoop(ctx, o.Loop, st, SystemClock{}, log)
	if err != nil {
		return err
	}
	secret, err := operatorSecret(o)
	if err != nil {
		return err
	}
	loopCtx, stopLoop := context.WithCancel(context.WithoutCancel(ctx))
	loopDone := make(chan error, 1)
	go func() { loopDone <- loop.Run(loopCtx) }()
	defer func() { stopLoop(); <-loopDone }()
	rp := &Replanner{Loop: loop, Log: log, Planning: o.Server.Planning}
	rpDone := make(chan struct{})
	go func() { defer close(rpDone); rp.Run(loopCtx) }()
	defer func() { stopLoop(); <-rpDone }()
	if hash := HashToken(secret); loop.View().Tokens[hash].Role != RoleOperator {
		if _, err := loop.Do(ctx, func(e *Engine, now time.Time) (any, error) {
			e.AddToken(now, hash, Principal{Role: RoleOperator, Name: "bootstrap"})
			return nil, nil
		}); err != nil {
			return fmt.Errorf("store operator token: %w", err)
		}
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	if o.TLS.CertFile != "" {
		cfg, err := o.TLS.config()
		if err != nil {
			ln.Close()
			return err
		}
		ln = tls.NewListener(ln, cfg)
	}
	api := NewServer(loop, o.Server, log, audit)
	api.tokenFile = HashToken(secret)
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String(), "data", o.DataDir)
	if o.Ready != nil {
		o.Ready(ln.Addr().String(), secret)
	}
	select {
	case <-ctx.Done():
	case err := <-serveDone:
		return fmt.Errorf("serve http: %w", err)
	case err := <-loopDone:
		loopDone <- err
		if err != nil {
			srv.Close()
			return err
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shut down http: %w", err)
	}
	return nil
}

func operatorSecret(o Options) (string, error) {
	path := o.TokenFile
	if path == "" {
		path = filepath.Join(o.DataDir, "operator.token")
	}
	raw, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(raw))
		if s == "" {
			return "", fmt.Errorf("read operator token %s: file is empty", path)
		}
		return s, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read operator token: %w", err)
	}
	s := NewSecret()
	if err := writeSecret(path, s); err != nil {
		return "", fmt.Errorf("write operator token: %w", err)
	}
	return s, nil
}

// secretHook, when set, is called at each step of writeSecret (crash tests).
var secretHook func(point string)

// writeSecret writes the token file whole or not at all: a temporary file beside it, fsynced,
// renamed over path, and the directory fsynced. os.WriteFile truncates and then writes, so a
// process killed between the two left an empty file that every later start refused ("file is
// empty"), and an unsynced one could be empty after a power loss.
func writeSecret(path, s string) error {
	hook := func(p string) {
		if secretHook != nil {
			secretHook(p)
		}
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	hook("created")
	if _, err := f.WriteString(s + "\n"); err != nil {
		f.Close()
		return err
	}
	hook("written")
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	hook("synced")
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	hook("renamed")
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// TLSFiles names the PEM files of the server's certificate and of the CA for client certificates.
type TLSFiles struct {
	CertFile, KeyFile, ClientCAFile string
}

func (f TLSFiles) config() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load server certificate %s: %w", f.CertFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.ClientCAFile != "" {
		pem, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("read client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("read client CA %s: no PEM certificate found", f.ClientCAFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
