package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ErrNotReady reports a readiness condition that did not hold before the
// context ended.
var ErrNotReady = errors.New("not ready")

const pollInterval = 100 * time.Millisecond

// poll runs cond until it returns true, an error, the context ends (ErrNotReady)
// or one of the watched processes exits (ErrComponentExited) — the latter
// turns a crashed component into an immediate, explained failure instead of a
// timeout.
func poll(ctx context.Context, what string, cond func(context.Context) (bool, error), watched ...*process) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		for _, p := range watched {
			if p == nil {
				continue
			}
			if err := p.exitedError(); err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
		}
		attemptCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := cond(attemptCtx)
		cancel()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w: %w", what, ErrNotReady, ctx.Err())
		case <-ticker.C:
		}
	}
}

// httpProbe returns a condition that is true once url answers 200.
// caPEM nil means the endpoint's certificate is self-signed by the component
// itself (kube-controller-manager, kube-scheduler) and is not verified: the
// probe only asks a loopback port whether the component is healthy.
func httpProbe(url string, caPEM []byte, bearer string) func(context.Context) (bool, error) {
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if caPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		tlsConf.RootCAs = pool
	} else {
		tlsConf.InsecureSkipVerify = true //nolint:gosec // loopback health probe of a self-signed component
	}
	hc := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tlsConf, DisableKeepAlives: true},
	}
	return func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, fmt.Errorf("probe %s: %w", url, err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil // not listening yet
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}
}
