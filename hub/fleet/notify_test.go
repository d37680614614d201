package fleet

import (
	"context"
	"strings"
	"testing"
)

const goodProvider = `apiVersion: flotilla.dev/v1alpha1
kind: Provider
metadata:
  name: ops
spec:
  type: generic-hmac
  address: https://hooks.example.com/flotilla
  secretRef:
    name: ops-hook
`

const goodAlert = `apiVersion: flotilla.dev/v1alpha1
kind: Alert
metadata:
  name: prod
spec:
  providerRef:
    name: ops
  eventSeverity: error
  eventSources:
    - kind: Fleet
      name: prod
    - kind: Application
      name: "*"
  eventReasons: [Failing, WaveHeld]
`

func notifyRepo(provider, alert string) map[string]string {
	return map[string]string{
		"notifications/providers/ops.yaml": provider,
		"notifications/alerts/prod.yaml":   alert,
		"clusters/member1.yaml":            clusterWith("member1", "env: prod"),
		"fleets/prod.yaml":                 "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\nspec:\n  clusters: [member1]\n",
	}
}

func TestLoadNotifications(t *testing.T) {
	r, err := Load(context.Background(), writeRepo(t, notifyRepo(goodProvider, goodAlert)))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Providers) != 1 || len(r.Alerts) != 1 || r.Alerts[0].Spec.ProviderRef.Name != "ops" || r.Providers[0].Spec.SecretRef.Name != "ops-hook" {
		t.Fatalf("providers %+v alerts %+v", r.Providers, r.Alerts)
	}
}

// TestBadNotifications: each problem of a Provider or an Alert is
// reported once, at its file, line and field, with its class.
func TestBadNotifications(t *testing.T) {
	provider := func(old, new string) map[string]string {
		if !strings.Contains(goodProvider, old) {
			t.Fatalf("provider lacks %q", old)
		}
		return notifyRepo(strings.Replace(goodProvider, old, new, 1), goodAlert)
	}
	alert := func(old, new string) map[string]string {
		if !strings.Contains(goodAlert, old) {
			t.Fatalf("alert lacks %q", old)
		}
		return notifyRepo(goodProvider, strings.Replace(goodAlert, old, new, 1))
	}
	cases := []struct {
		name    string
		changes map[string]string
		want    string
		class   error
	}{
		{"unknown type", provider("type: generic-hmac", "type: pagerduty"),
			`notifications/providers/ops.yaml:6: spec.type: invalid value: "pagerduty" is not one of generic, generic-hmac, slack, msteams`, ErrInvalidValue},
		{"credentials in the address", provider("https://hooks", "https://user:pw@hooks"),
			"notifications/providers/ops.yaml:7: spec.address: invalid value: holds credentials: give them in spec.secretRef", ErrInvalidValue},
		{"not a URL", provider("https://hooks.example.com/flotilla", "hooks.example.com"),
			`notifications/providers/ops.yaml:7: spec.address: invalid value: "hooks.example.com" is not an http(s) URL`, ErrInvalidValue},
		{"hmac without secret", provider("  secretRef:\n    name: ops-hook\n", ""),
			"notifications/providers/ops.yaml:5: spec.secretRef: required field missing: generic-hmac signs with the secret's token", ErrRequired},
		{"channel of a webhook", provider("  type: generic-hmac\n", "  type: generic-hmac\n  channel: ops\n"),
			"notifications/providers/ops.yaml:7: spec.channel: invalid value: only a slack provider has one", ErrInvalidValue},
		{"unknown field", provider("  type: generic-hmac\n", "  type: generic-hmac\n  secret: x\n"),
			"notifications/providers/ops.yaml:7: spec.secret: unknown field", ErrUnknownField},
		{"missing provider", alert("name: ops", "name: slack"),
			`notifications/alerts/prod.yaml:7: spec.providerRef.name: reference to a missing object: no Provider "slack" in notifications/providers/`, ErrDanglingReference},
		{"bad severity", alert("eventSeverity: error", "eventSeverity: warning"),
			`notifications/alerts/prod.yaml:8: spec.eventSeverity: invalid value: "warning" is not info or error`, ErrInvalidValue},
		{"missing fleet", alert("name: prod\n    -", "name: staging\n    -"),
			`notifications/alerts/prod.yaml:11: spec.eventSources[0].name: reference to a missing object: no Fleet "staging"`, ErrDanglingReference},
		{"unknown source kind", alert("kind: Application", "kind: Kustomization"),
			`notifications/alerts/prod.yaml:12: spec.eventSources[1].kind: invalid value: "Kustomization" is not one of Fleet, Application, Cluster`, ErrInvalidValue},
		{"unknown reason", alert("WaveHeld]", "WaveStuck]"),
			`notifications/alerts/prod.yaml:14: spec.eventReasons[1]: invalid value: "WaveStuck" is not one of Failing`, ErrInvalidValue},
		{"wrong kind in alerts", alert("kind: Alert", "kind: Provider"),
			`notifications/alerts/prod.yaml:2: kind: invalid value: a file in notifications/ must be an Alert, not "Provider"`, ErrInvalidValue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { loadsWithOneProblem(t, tc.changes, tc.want, tc.class) })
	}
}
