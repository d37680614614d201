package apply

import "testing"

func TestJudgeLive(t *testing.T) {
	owned := map[string]string{LabelManagedBy: ManagedByValue, LabelUnit: "web"}
	applied := Entry{Fingerprint: "fp1"}
	tests := []struct {
		name string
		live liveMeta
		want liveVerdict
	}{
		{"as applied", liveMeta{exists: true, fingerprint: "fp1", labels: owned}, liveUnchanged},
		{"deleted", liveMeta{}, liveDrifted},
		{"being deleted", liveMeta{exists: true, deleting: true, fingerprint: "fp1", labels: owned}, liveDrifted},
		{"field taken over by another manager", liveMeta{exists: true, fingerprint: "fp2", labels: owned}, liveDrifted},
		{"fields added by kubectl", liveMeta{exists: true, foreign: true, fingerprint: "fp1", labels: owned}, liveDrifted},
		{"ownership labels lost", liveMeta{exists: true, fingerprint: "fp1", labels: map[string]string{LabelManagedBy: ManagedByValue}}, liveDrifted},
		{"adopted by another unit", liveMeta{exists: true, fingerprint: "fp1", labels: map[string]string{LabelManagedBy: ManagedByValue, LabelUnit: "other"}}, liveDrifted},
		{"disabled wins over drift", liveMeta{exists: true, disabled: true, fingerprint: "fp2"}, liveDisabled},
		{"disabled as applied", liveMeta{exists: true, disabled: true, fingerprint: "fp1", labels: owned}, liveDisabled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := judgeLive(tt.live, applied, "web"); got != tt.want {
				t.Errorf("judgeLive = %d, want %d", got, tt.want)
			}
		})
	}
}
