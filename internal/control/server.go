package control

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ServerConfig tunes the HTTP API.
type ServerConfig struct {
	// MaxBody bounds a request body in bytes (default 64 KiB).
	MaxBody int64
	// Rate and Burst bound each token's requests per second (defaults 1000 and 2000).
	Rate  float64
	Burst int
	// LongPoll bounds how long a layout request waits for a change (default 30s).
	LongPoll time.Duration
	// Planning is how POST /v1/plan and /v1/plan/apply plan the pool sent (the zero value: by
	// the queueing model alone).
	Planning Planning
}

// Server is the HTTP/JSON API under /v1, the console and /metrics.
type Server struct {
	loop    *Loop
	cfg     ServerConfig
	log     *slog.Logger
	audit   *slog.Logger
	metrics *apiMetrics
	mux     *http.ServeMux
	limMu   sync.Mutex
	limits  map[string]*rate.Limiter
	// tokenFile is the hash of the operator token of the server's token file (Run sets it): the
	// server stores it again at every start, so it is not revoked.
	tokenFile string
}

// NewServer builds the API over a loop. audit receives one record per change.
func NewServer(loop *Loop, cfg ServerConfig, log, audit *slog.Logger) *Server {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 64 << 10
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 1000
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 2000
	}
	if cfg.LongPoll <= 0 {
		cfg.LongPoll = 30 * time.Second
	}
	s := &Server{loop: loop, cfg: cfg, log: log, audit: audit, mux: http.NewServeMux(),
		limits: map[string]*rate.Limiter{}, metrics: newAPIMetrics(loop)}
	for _, rt := range routes {
		s.mux.HandleFunc(rt.Method+" "+rt.Path, s.wrap(rt))
	}
	s.mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(openapiJSON)
	})
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	s.mux.Handle("GET /metrics", s.metrics.handler())
	s.mux.Handle("GET /", consoleHandler())
	return s
}

// unmatchedRoute is the route label of requests no route takes (one label, so that scanning
// for paths cannot grow the metric without bound).
const unmatchedRoute = "unmatched"

// ServeHTTP implements http.Handler. A request no route takes gets problem details like every
// other error: 405 with the mux's Allow header when another method has the path, else 404 (a
// GET under /v1/ too, which the console's catch-all would otherwise answer).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	switch {
	case pattern == "":
		c := &captureWriter{header: http.Header{}, status: http.StatusNotFound}
		h.ServeHTTP(c, r) // the mux's own answer, for its status and Allow header
		if c.status != http.StatusNotFound && c.status != http.StatusMethodNotAllowed {
			s.mux.ServeHTTP(w, r) // a redirect or anything else the mux answers itself
			return
		}
		allow := s.allowed(r, c.header.Get("Allow"))
		if allow != "" {
			w.Header().Set("Allow", allow)
		}
		if c.status == http.StatusMethodNotAllowed && allow != "" {
			s.problem(w, r, errStatus(c.status, "method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
			s.metrics.observe(unmatchedRoute, c.status, 0)
			return
		}
		s.problem(w, r, errStatus(http.StatusNotFound, "no endpoint %s %s", r.Method, r.URL.Path))
		s.metrics.observe(unmatchedRoute, http.StatusNotFound, 0)
	case pattern == "GET /" && strings.HasPrefix(r.URL.Path, "/v1/"):
		s.problem(w, r, errStatus(http.StatusNotFound, "no endpoint %s %s", r.Method, r.URL.Path))
		s.metrics.observe(unmatchedRoute, http.StatusNotFound, 0)
	default:
		s.mux.ServeHTTP(w, r)
	}
}

// allowed is the mux's Allow list for r's path without the methods only the console's catch-all
// ("GET /") takes there: under /v1/ such a GET is answered 404, so it is not allowed.
func (s *Server) allowed(r *http.Request, allow string) string {
	if allow == "" || !strings.HasPrefix(r.URL.Path, "/v1/") {
		return allow
	}
	var keep []string
	for _, m := range strings.Split(allow, ",") {
		m = strings.TrimSpace(m)
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "GET /" {
			keep = append(keep, m)
		}
	}
	return strings.Join(keep, ", ")
}

// captureWriter keeps a response's status and header and discards its body.
type captureWriter struct {
	header http.Header
	status int
}

func (c *captureWriter) Header() http.Header         { return c.header }
func (c *captureWriter) Write(b []byte) (int, error) { return len(b), nil }
func (c *captureWriter) WriteHeader(code int)        { c.status = code }

// HashToken is how tokens are stored: the hex SHA-256 of the secret. Tokens are 256-bit random
// values, so a fast hash is enough (there is nothing to brute-force as with passwords).
func HashToken(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// handlerFunc serves one route for an authenticated, authorized principal.
type handlerFunc func(s *Server, w http.ResponseWriter, r *http.Request, p Principal) error

// route is one endpoint: the table the mux, the OpenAPI test and the authorization test share.
type route struct {
	Method, Path string
	Roles        []Role
	Change       bool
	h            handlerFunc
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (s *Server) wrap(rt route) http.HandlerFunc {
	return func(w0 http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w := &statusWriter{ResponseWriter: w0, status: 200}
		var p Principal
		err := s.authorize(r, rt, &p)
		if err == nil {
			err = checkContentType(r, rt)
		}
		if err == nil {
			r = r.WithContext(context.WithValue(r.Context(), viewKey{}, s.loop.View()))
			if rt.Path != "/v1/plans/dry-run" && rt.Path != "/v1/plans/apply" { // a Pool document has its own, larger bound (maxPoolBody)
				r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
			}
			err = rt.h(s, w, r, p)
		}
		if err != nil {
			s.problem(w, r, err)
		}
		s.metrics.observe(rt.Path, w.status, time.Since(start))
		if rt.Change && w.status < 300 {
			s.audit.Info("change", "role", p.Role, "tenant", p.Tenant, "node", p.Node, "token", p.Name,
				"method", r.Method, "path", r.URL.Path, "status", w.status)
		}
	}
}

// checkContentType refuses (415) a body whose Content-Type names a format the route does not
// read: JSON everywhere (application/json, application/*+json), YAML too for a Pool document.
// No Content-Type, and curl's default for -d (application/x-www-form-urlencoded), are read as
// the route's format.
func checkContentType(r *http.Request, rt route) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" || r.ContentLength == 0 {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return errStatus(http.StatusUnsupportedMediaType, "Content-Type %q does not parse: %v", ct, err)
	}
	switch {
	case mt == "application/json", strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"),
		mt == "application/x-www-form-urlencoded":
		return nil
	case strings.HasPrefix(rt.Path, "/v1/plans/"):
		if mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml" || mt == "text/x-yaml" {
			return nil
		}
		return errStatus(http.StatusUnsupportedMediaType, "Content-Type %s: a Pool document is JSON (application/json) or YAML (application/yaml)", mt)
	}
	return errStatus(http.StatusUnsupportedMediaType, "Content-Type %s: the body must be JSON (application/json)", mt)
}

// Problem errors carry an HTTP status.
type httpError struct {
	status int
	title  string
	detail string
}

func (e *httpError) Error() string { return e.detail }

func errStatus(status int, format string, args ...any) error {
	return &httpError{status: status, title: http.StatusText(status), detail: fmt.Sprintf(format, args...)}
}

func (s *Server) authorize(r *http.Request, rt route, p *Principal) error {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || secret == "" {
		return errStatus(http.StatusUnauthorized, "missing bearer token")
	}
	hash := HashToken(secret)
	pr, ok := s.loop.View().Tokens[hash]
	if !ok {
		return errStatus(http.StatusUnauthorized, "unknown token")
	}
	*p = pr.Principal
	if !s.limiter(hash).Allow() {
		return errStatus(http.StatusTooManyRequests, "rate limit of %g requests/s exceeded for this token", s.cfg.Rate)
	}
	for _, role := range rt.Roles {
		if role == pr.Role {
			return nil
		}
	}
	return errStatus(http.StatusForbidden, "role %s may not %s %s", pr.Role, rt.Method, rt.Path)
}

// forget drops a revoked token's rate limiter.
func (s *Server) forget(hash string) {
	s.limMu.Lock()
	defer s.limMu.Unlock()
	delete(s.limits, hash)
}

func (s *Server) limiter(hash string) *rate.Limiter {
	s.limMu.Lock()
	defer s.limMu.Unlock()
	l, ok := s.limits[hash]
	if !ok {
		l = rate.NewLimiter(rate.Limit(s.cfg.Rate), s.cfg.Burst)
		s.limits[hash] = l
	}
	return l
}

// problem writes err as RFC 9457 problem details.
func (s *Server) problem(w http.ResponseWriter, r *http.Request, err error) {
	body := map[string]any{"type": "about:blank", "instance": r.URL.Path}
	status := http.StatusInternalServerError
	var he *httpError
	var inv *InvalidError
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &inv):
		status = http.StatusBadRequest
		if inv.conflict {
			status = http.StatusConflict
		}
		body["errors"] = inv.Fields
		body["detail"] = err.Error()
	case errors.As(err, &mb):
		status = http.StatusRequestEntityTooLarge
		body["detail"] = fmt.Sprintf("request body over %d bytes", mb.Limit)
	case errors.As(err, &he):
		status = he.status
		body["detail"] = he.detail
	case errors.Is(err, ErrRemoved):
		status = http.StatusGone
		body["detail"] = err.Error()
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
		body["detail"] = err.Error()
	case errors.Is(err, ErrConflict):
		status = http.StatusConflict
		body["detail"] = err.Error()
	case errors.Is(err, ErrStopped):
		status = http.StatusServiceUnavailable
		body["detail"] = err.Error()
	default:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		body["detail"] = "internal error"
	}
	body["status"] = status
	body["title"] = http.StatusText(status)
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}
