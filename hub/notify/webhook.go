package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/redact"
)

// ErrSend: a provider refused or failed an event; the error says the
// provider and why, never its address or token.
var ErrSend = errors.New("event not sent")

// ErrCredentials: a provider's secret is missing or unreadable.
var ErrCredentials = errors.New("provider credentials")

// SignatureHeader carries generic-hmac's signature, as Flux's:
// "sha256=" and the hex HMAC-SHA256 of the body keyed with the token.
const SignatureHeader = "X-Signature"

// defaultSendTimeout bounds a send when the provider sets no timeout.
const defaultSendTimeout = 15 * time.Second

// Credentials are a provider's secret: the webhook's address (when not in
// the fleet repo) and a token.
type Credentials struct {
	Address string
	Token   string
}

// SecretEnv is the environment variable of a secret's key:
// FLOTILLA_NOTIFY_<NAME>_<KEY>, NAME upper-cased with - as _.
func SecretEnv(name, key string) string {
	return "FLOTILLA_NOTIFY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_" + strings.ToUpper(key)
}

// LoadCredentials reads the secret a provider names from the environment,
// then from dir/<name>/{address,token} when dir is set. A provider without
// secretRef has none.
func LoadCredentials(p *fleet.Provider, dir string) (Credentials, error) {
	var c Credentials
	ref := p.Spec.SecretRef
	if ref == nil {
		return c, nil
	}
	for _, kv := range []struct {
		key string
		to  *string
	}{{"address", &c.Address}, {"token", &c.Token}} {
		if v, ok := os.LookupEnv(SecretEnv(ref.Name, kv.key)); ok {
			*kv.to = strings.TrimSpace(v)
			continue
		}
		if dir == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, ref.Name, kv.key))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return c, fmt.Errorf("%w: provider %s: %w", ErrCredentials, p.Metadata.Name, err)
		}
		*kv.to = strings.TrimSpace(string(data))
	}
	if c.Address == "" && p.Spec.Address == "" {
		return c, fmt.Errorf("%w: provider %s: no address: set $%s or %s", ErrCredentials, p.Metadata.Name,
			SecretEnv(ref.Name, "address"), filepath.Join("<credentials-dir>", ref.Name, "address"))
	}
	if c.Token == "" && p.Spec.Type == fleet.ProviderGenericHMAC {
		return c, fmt.Errorf("%w: provider %s: generic-hmac needs a token: set $%s or %s", ErrCredentials, p.Metadata.Name,
			SecretEnv(ref.Name, "token"), filepath.Join("<credentials-dir>", ref.Name, "token"))
	}
	return c, nil
}

// Webhook sends events to one provider.
type Webhook struct {
	provider *fleet.Provider
	address  string
	token    string
	client   *http.Client
	scrub    redact.Scrubber
}

// NewWebhook is the provider's webhook with its credentials (the secret's
// address wins over spec.address).
func NewWebhook(p *fleet.Provider, c Credentials) (*Webhook, error) {
	addr := c.Address
	if addr == "" {
		addr = p.Spec.Address
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%w: provider %s: the address is not an http(s) URL", ErrCredentials, p.Metadata.Name)
	}
	timeout := defaultSendTimeout
	if p.Spec.Timeout != nil {
		timeout = p.Spec.Timeout.Duration
	}
	return &Webhook{provider: p, address: addr, token: c.Token, client: &http.Client{Timeout: timeout}, scrub: redact.New(addr, c.Token)}, nil
}

// Send posts e in the provider's format.
func (w *Webhook) Send(ctx context.Context, e *Event) error {
	body, err := w.body(e)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.address, bytes.NewReader(body))
	if err != nil {
		return w.fail(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", reportingController)
	if w.provider.Spec.Type == fleet.ProviderGenericHMAC {
		req.Header.Set(SignatureHeader, Sign(body, w.token))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return w.fail(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return w.fail(fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(msg))))
	}
	return nil
}

// fail is err without the address or token: a url.Error names the URL,
// and a Slack or Teams webhook's URL is its secret.
func (w *Webhook) fail(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%w: provider %s: %s", ErrSend, w.provider.Metadata.Name, w.scrub.Error(err))
}

// Sign is generic-hmac's X-Signature of body keyed with token.
func Sign(body []byte, token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (w *Webhook) body(e *Event) ([]byte, error) {
	switch w.provider.Spec.Type {
	case fleet.ProviderSlack:
		return json.Marshal(slackMessage(w.provider.Spec, e))
	case fleet.ProviderMSTeams:
		return json.Marshal(teamsMessage(e))
	default:
		return json.Marshal(e)
	}
}

// title is an event's first line: "Failing: Cluster/a1".
func title(e *Event) string {
	return e.Reason + ": " + e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name
}

// slackMessage is a Slack incoming webhook's message with one attachment,
// coloured by severity, as Flux's slack provider sends.
func slackMessage(s fleet.ProviderSpec, e *Event) map[string]any {
	color := "good"
	if e.Severity == fleet.SeverityError {
		color = "danger"
	}
	var fields []map[string]any
	for _, k := range slices.Sorted(maps.Keys(e.Metadata)) {
		fields = append(fields, map[string]any{"title": k, "value": e.Metadata[k], "short": false})
	}
	msg := map[string]any{"attachments": []map[string]any{{
		"color": color, "author_name": reportingController, "title": title(e), "text": e.Message,
		"mrkdwn_in": []string{"text"}, "fields": fields,
	}}}
	if s.Channel != "" {
		msg["channel"] = s.Channel
	}
	if s.Username != "" {
		msg["username"] = s.Username
	}
	return msg
}

// teamsMessage is an Adaptive Card, which Teams' Workflows webhooks take.
func teamsMessage(e *Event) map[string]any {
	color := "good"
	if e.Severity == fleet.SeverityError {
		color = "attention"
	}
	var facts []map[string]string
	for _, k := range slices.Sorted(maps.Keys(e.Metadata)) {
		facts = append(facts, map[string]string{"title": k, "value": e.Metadata[k]})
	}
	card := map[string]any{
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard", "version": "1.4",
		"body": []map[string]any{
			{"type": "TextBlock", "text": title(e), "weight": "bolder", "size": "medium", "color": color, "wrap": true},
			{"type": "TextBlock", "text": e.Message, "wrap": true},
			{"type": "FactSet", "facts": facts},
		},
	}
	return map[string]any{"type": "message", "attachments": []map[string]any{{
		"contentType": "application/vnd.microsoft.card.adaptive", "content": card,
	}}}
}
