package webhookrecv

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/notify"
)

// Receiver is a webhook endpoint on loopback.
type Receiver struct {
	// URL is where to send.
	URL string

	key      string
	mu       sync.Mutex
	events   []notify.Event
	bodies   []map[string]any
	failNext bool
	refused  int
}

// Start serves a receiver until the test ends; with key set, a body whose
// X-Signature is not its HMAC-SHA256 keyed with key is refused (401).
func Start(t testing.TB, key string) *Receiver {
	t.Helper()
	r := &Receiver{key: key}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.key != "" {
		mac := hmac.New(sha256.New, []byte(r.key))
		mac.Write(body)
		if !hmac.Equal([]byte(req.Header.Get(notify.SignatureHeader)), []byte("sha256="+hex.EncodeToString(mac.Sum(nil)))) {
			r.refused++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
	}
	if r.failNext {
		r.failNext = false
		http.Error(w, "try later", http.StatusInternalServerError)
		return
	}
	var e notify.Event
	var raw map[string]any
	if json.Unmarshal(body, &e) != nil || json.Unmarshal(body, &raw) != nil {
		http.Error(w, "not JSON", http.StatusBadRequest)
		return
	}
	r.events = append(r.events, e)
	r.bodies = append(r.bodies, raw)
}

// FailNext makes the next send fail with 500.
func (r *Receiver) FailNext() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failNext = true
}

// Received lists the accepted events as "Reason Kind/name".
func (r *Receiver) Received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.events))
	for i, e := range r.events {
		out[i] = e.Reason + " " + e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name
	}
	return out
}

// Events are the accepted events, decoded.
func (r *Receiver) Events() []notify.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]notify.Event(nil), r.events...)
}

// Bodies are the accepted bodies as JSON objects (Slack's and Teams'
// formats are not events).
func (r *Receiver) Bodies() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.bodies...)
}

// Refused counts the sends whose signature did not verify.
func (r *Receiver) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}
