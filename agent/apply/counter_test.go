package apply

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
)

func TestWriteCounterClassifiesRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()

	var wrappedBefore int
	cfg := &rest.Config{Host: srv.URL}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) { wrappedBefore++; return rt.RoundTrip(r) })
	})
	var c WriteCounter
	c.Wrap(cfg)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	requests := []struct{ method, query string }{
		{http.MethodGet, ""},
		{http.MethodGet, "watch=true"},
		{http.MethodPatch, "fieldManager=flotilla&force=true"},
		{http.MethodPatch, "dryRun=All&fieldManager=flotilla"},
		{http.MethodPost, ""},
		{http.MethodPut, ""},
		{http.MethodDelete, ""},
		{http.MethodDelete, "dryRun=All"},
	}
	for _, rq := range requests {
		req, _ := http.NewRequest(rq.method, srv.URL+"/api/v1/namespaces/x/configmaps/y?"+rq.query, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if c.Reads() != 2 || c.Writes() != 4 || c.DryRuns() != 2 {
		t.Fatalf("reads=%d writes=%d dryRuns=%d, want 2/4/2", c.Reads(), c.Writes(), c.DryRuns())
	}
	if wrappedBefore != len(requests) {
		t.Fatalf("existing wrapper saw %d requests, want %d", wrappedBefore, len(requests))
	}
	c.Reset()
	if c.Reads()+c.Writes()+c.DryRuns() != 0 {
		t.Fatal("reset did not zero the counts")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
