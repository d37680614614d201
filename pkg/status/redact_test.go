package status

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/redact"
)

const marker = "s3cr3t-MARKER-value"

func TestRedactDocumentCoversEveryMessage(t *testing.T) {
	secret := "password: " + marker
	doc := &ClusterStatus{
		Cluster:      "c",
		LastError:    secret,
		Conditions:   []metav1.Condition{{Type: ConditionReady, Message: secret}},
		Verification: &Verification{Message: secret},
		Units: []UnitStatus{{Name: "u", LastError: secret,
			Conditions: []metav1.Condition{{Type: ConditionStalled, Message: secret}}}},
		Jobs: []JobStatus{{Name: "j", Message: secret}},
	}
	RedactDocument(doc)
	data, err := Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), marker) {
		t.Fatalf("marker survived RedactDocument:\n%s", data)
	}
	if n := strings.Count(string(data), redact.Mask); n != 6 {
		t.Errorf("%d messages redacted, want 6:\n%s", n, data)
	}
}

func TestRedactDocumentBoundsMessages(t *testing.T) {
	doc := &ClusterStatus{Cluster: "c", LastError: strings.Repeat("é", MaxMessageLength)}
	RedactDocument(doc)
	if len(doc.LastError) > MaxMessageLength {
		t.Fatalf("message is %d bytes, more than %d", len(doc.LastError), MaxMessageLength)
	}
	if !strings.HasSuffix(doc.LastError, "(truncated)") || !strings.HasPrefix(doc.LastError, "éé") {
		t.Errorf("bad truncation: …%s", doc.LastError[len(doc.LastError)-30:])
	}
}
