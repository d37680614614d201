package notify

import (
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// TestFactTells: a fact is told when its value changes, a recovery only
// after something to recover from, a quiet fact not on a provider's first
// run.
func TestFactTells(t *testing.T) {
	ev := &Event{}
	tests := []struct {
		name           string
		fact           Fact
		prev           string
		seen, baseline bool
		want           bool
	}{
		{"unchanged", Fact{Value: "Failing", Event: ev}, "Failing", true, false, false},
		{"changed", Fact{Value: "Failing", Event: ev}, "ok", true, false, true},
		{"first seen, wrong now", Fact{Value: "Failing", Event: ev}, "", false, true, true},
		{"no event", Fact{Value: "x"}, "y", true, false, false},
		{"recovery", Fact{Value: "ok", Event: ev, AfterChange: true}, "Failing", true, false, true},
		{"healthy when first seen", Fact{Value: "ok", Event: ev, AfterChange: true}, "", false, false, false},
		{"quiet on the first run", Fact{Value: "rev", Event: ev, Quiet: true}, "", false, true, false},
		{"quiet after the first run", Fact{Value: "rev", Event: ev, Quiet: true}, "", false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fact.tells(tt.prev, tt.seen, tt.baseline); got != tt.want {
				t.Errorf("tells = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAlertMatches: sources by fleet, application and cluster, "*",
// severity and reasons.
func TestAlertMatches(t *testing.T) {
	failing := &Event{Reason: "Failing", Severity: fleet.SeverityError, cluster: "a1", fleets: []string{"prod"}}
	released := &Event{Reason: fleet.EventWaveReleased, Severity: fleet.SeverityInfo, application: "web", fleets: []string{"prod", "edge"}}
	src := func(kind, name string) []fleet.EventSource { return []fleet.EventSource{{Kind: kind, Name: name}} }
	tests := []struct {
		name string
		spec fleet.AlertSpec
		e    *Event
		want bool
	}{
		{"everything", fleet.AlertSpec{}, released, true},
		{"errors only", fleet.AlertSpec{EventSeverity: fleet.SeverityError}, released, false},
		{"errors only, an error", fleet.AlertSpec{EventSeverity: fleet.SeverityError}, failing, true},
		{"its fleet", fleet.AlertSpec{EventSources: src(fleet.KindFleet, "edge")}, released, true},
		{"another fleet", fleet.AlertSpec{EventSources: src(fleet.KindFleet, "dev")}, failing, false},
		{"any cluster", fleet.AlertSpec{EventSources: src(fleet.KindCluster, "*")}, failing, true},
		{"any cluster, an application's event", fleet.AlertSpec{EventSources: src(fleet.KindCluster, "*")}, released, false},
		{"the application", fleet.AlertSpec{EventSources: src(fleet.KindApplication, "web")}, released, true},
		{"other reasons", fleet.AlertSpec{EventReasons: []string{"Failing"}}, released, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := matches(tt.spec, tt.e); got != tt.want {
				t.Errorf("matches = %v, want %v", got, tt.want)
			}
		})
	}
}
