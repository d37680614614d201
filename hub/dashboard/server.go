package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Loader reads the fleet and builds the page's model.
type Loader func(ctx context.Context) (*Model, error)

// Paths Server answers.
const (
	PathPage     = "/"
	PathFragment = "/fragment"
	PathJSON     = "/fleet.json"
	PathHealth   = "/healthz"
)

// Server serves the page of the fleet, re-read every Refresh by Run. It
// renders once per read, so any number of viewers cost one Git read per
// interval.
type Server struct {
	Load    Loader
	Refresh time.Duration
	// Timeout bounds one read; Refresh when zero.
	Timeout time.Duration
	// Errorf reports a failed read (the page keeps the last good one).
	Errorf func(format string, args ...any)
	// Metrics, when set, are updated from every successful read and
	// served at PathMetrics.
	Metrics *Metrics

	mu       sync.RWMutex
	model    *Model
	page     []byte
	fragment []byte
	json     []byte
}

// Update reads the fleet once and, when it succeeds, replaces what is
// served; a failure keeps the last good read, marked with the error.
func (s *Server) Update(ctx context.Context) error {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = max(s.Refresh, 10*time.Second)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	m, err := s.Load(ctx)
	cancel()
	if err != nil {
		s.mu.RLock()
		last := s.model
		s.mu.RUnlock()
		if last == nil {
			return err
		}
		stale := *last
		stale.Error = clean(err.Error())
		if rerr := s.publish(&stale); rerr != nil {
			return rerr
		}
		return err
	}
	if err := s.publish(m); err != nil {
		return err
	}
	if s.Metrics != nil {
		s.Metrics.Set(m.progress, time.Now())
	}
	return nil
}

func (s *Server) publish(m *Model) error {
	var page, frag bytes.Buffer
	if err := WritePage(&page, m, PageOptions{Refresh: s.Refresh, FragmentURL: PathFragment[1:]}); err != nil {
		return err
	}
	if err := WriteFragment(&frag, m); err != nil {
		return err
	}
	j, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	s.mu.Lock()
	s.model, s.page, s.fragment, s.json = m, page.Bytes(), frag.Bytes(), j
	s.mu.Unlock()
	return nil
}

// Run updates every Refresh until ctx ends.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Update(ctx); err != nil && ctx.Err() == nil && s.Errorf != nil {
				s.Errorf("refresh: %v", err)
			}
		}
	}
}

// ServeHTTP answers GET and HEAD on the page, the fragment, the JSON and,
// with Metrics, the metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == PathMetrics && s.Metrics != nil {
		s.Metrics.Handler().ServeHTTP(w, r)
		return
	}
	s.mu.RLock()
	page, frag, j := s.page, s.fragment, s.json
	s.mu.RUnlock()
	var body []byte
	ctype := "text/html; charset=utf-8"
	switch r.URL.Path {
	case PathPage:
		body = page
	case PathFragment:
		body = frag
	case PathJSON:
		body, ctype = j, "application/json"
	case PathHealth:
		body, ctype = []byte("ok\n"), "text/plain; charset=utf-8"
	default:
		http.NotFound(w, r)
		return
	}
	if body == nil {
		http.Error(w, "the fleet has not been read yet", http.StatusServiceUnavailable)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	// Everything is inline; nothing may be loaded from elsewhere.
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	_, _ = w.Write(body)
}
