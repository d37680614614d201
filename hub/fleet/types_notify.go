package fleet

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Notifications are configured as Flux's notification-controller does it:
// a Provider says where events go, an Alert which events go to it.
const (
	// KindProvider is a webhook events are sent to:
	// notifications/providers/<name>.yaml.
	KindProvider = "Provider"
	// KindAlert routes events to a Provider: notifications/alerts/<name>.yaml.
	KindAlert = "Alert"

	ProvidersDir = "notifications/providers"
	AlertsDir    = "notifications/alerts"
)

// Provider types, with Flux's names.
const (
	// ProviderGeneric posts the event as JSON.
	ProviderGeneric = "generic"
	// ProviderGenericHMAC posts it signed: X-Signature: sha256=<HMAC of
	// the body keyed with the secret's token>.
	ProviderGenericHMAC = "generic-hmac"
	// ProviderSlack posts a message to a Slack incoming webhook (or one
	// that takes Slack's format: Mattermost, Rocket.Chat).
	ProviderSlack = "slack"
	// ProviderMSTeams posts an Adaptive Card to a Teams incoming webhook
	// (a Workflows webhook).
	ProviderMSTeams = "msteams"
)

// Event severities, as Flux's: an Alert of severity info gets every
// event, one of severity error only the errors.
const (
	SeverityInfo  = "info"
	SeverityError = "error"
)

// Provider is where events are sent.
type Provider struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta   `json:"metadata"`
	Spec     ProviderSpec `json:"spec"`
	Source   Source       `json:"-"`
}

// ProviderSpec is a webhook and how to reach it.
type ProviderSpec struct {
	// Type: generic, generic-hmac, slack or msteams.
	Type string `json:"type"`
	// Address is the webhook's URL. A Slack or Teams webhook URL is itself
	// a secret: give it in the secret's address instead.
	Address string `json:"address,omitempty"`
	// Channel and Username override a Slack webhook's defaults.
	Channel  string `json:"channel,omitempty"`
	Username string `json:"username,omitempty"`
	// SecretRef names the provider's credentials, read where notify runs,
	// never from the fleet repo: $FLOTILLA_NOTIFY_<NAME>_ADDRESS and
	// _TOKEN (NAME upper-cased, - as _), or the files address and token
	// of <--credentials-dir>/<name>/. generic-hmac signs with the token.
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// Timeout bounds each send; 15s when unset.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Suspend stops sending to this provider.
	Suspend bool `json:"suspend,omitempty"`
}

// LocalObjectReference names another object of the fleet repo, or a secret.
type LocalObjectReference struct {
	Name string `json:"name"`
}

// Alert sends the events of its sources, of at least its severity, to a
// provider.
type Alert struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     AlertSpec  `json:"spec"`
	Source   Source     `json:"-"`
}

// AlertSpec chooses events.
type AlertSpec struct {
	// ProviderRef is the Provider the events go to.
	ProviderRef LocalObjectReference `json:"providerRef"`
	// EventSeverity: info (every event, the default) or error (failures
	// only).
	EventSeverity string `json:"eventSeverity,omitempty"`
	// EventSources: the events about any of these; every event when empty.
	EventSources []EventSource `json:"eventSources,omitempty"`
	// EventReasons: only events with one of these reasons (Failing,
	// Recovered, WaveReleased, …); every reason when empty.
	EventReasons []string `json:"eventReasons,omitempty"`
	// Suspend stops this alert.
	Suspend bool `json:"suspend,omitempty"`
}

// EventSource matches the events about a Fleet's clusters, an Application
// or a Cluster; name "*" matches every object of the kind.
type EventSource struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Event reasons: what an event says happened.
const (
	// A cluster turned Failing, Unreachable, Untrusted, ClockSkew,
	// Conflict or PruneHeld (the fleet view's states, as the reason), or
	// Failing because a unit's secrets do not decrypt.
	EventDecryptionFailed = "DecryptionFailed"
	// EventRecovered: a cluster left one of those states.
	EventRecovered = "Recovered"
	// Rollouts.
	EventWaveReleased    = "WaveReleased"
	EventWaveHeld        = "WaveHeld"
	EventRolloutPaused   = "RolloutPaused"
	EventRolloutAborted  = "RolloutAborted"
	EventRolloutComplete = "RolloutComplete"
)

// EventReasons are every reason an event can have, for validation.
var EventReasons = []string{
	"Failing", "Unreachable", "Untrusted", "ClockSkew", "Conflict", "PruneHeld", EventDecryptionFailed, EventRecovered,
	EventWaveReleased, EventWaveHeld, EventRolloutPaused, EventRolloutAborted, EventRolloutComplete,
}
