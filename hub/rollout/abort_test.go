package rollout

import (
	"errors"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// TestChooseAbort: abort gives each cluster the newest unit its status
// reports Ready there among the kept ones, never the content this rollout
// gave it, and the unit it had at the start when its status cannot say.
func TestChooseAbort(t *testing.T) {
	// a1 (canary): v1 Ready, then v2 failed there and stayed, then the
	// fix v3 started a new rollout: Previous is the failed v2, v1 is kept
	// in Earlier. b2: released v3 over v1.
	st := &State{Application: "web", Revision: "sha256:rev3",
		Previous: map[string]string{"a1": "sha256:v2", "b2": "sha256:v1", "c3": "sha256:v1"},
		Earlier:  map[string][]string{"a1": {"sha256:v1"}}}
	current := map[string]string{"a1": "sha256:v3", "b2": "sha256:v3", "c3": "sha256:v1"}
	unit := func(hash string, ready ...string) *status.ClusterStatus {
		return &status.ClusterStatus{Units: []status.UnitStatus{{Name: "web", Hash: hash, ReadyHashes: ready}}}
	}
	tests := []struct {
		name string
		docs map[string]*status.ClusterStatus
		want string
	}{
		{"the fix is Ready on the canary: not the failed start, not the fix", map[string]*status.ClusterStatus{"a1": unit("sha256:v3", "sha256:v3", "sha256:v1")},
			"a1 gets unit v1 (its last unit Ready there)"},
		{"the fix failed on the canary too", map[string]*status.ClusterStatus{"a1": unit("sha256:v3", "sha256:v1")},
			"a1 gets unit v1 (its last unit Ready there)"},
		{"the start was Ready after all", map[string]*status.ClusterStatus{"a1": unit("sha256:v3", "sha256:v3", "sha256:v2", "sha256:v1")},
			"a1 gets unit v2 (its last unit Ready there)"},
		{"a released cluster goes back to what it had", map[string]*status.ClusterStatus{"b2": unit("sha256:v3", "sha256:v3", "sha256:v1")},
			"b2 gets unit v1 (its last unit Ready there)"},
		{"a held cluster keeps what it has", map[string]*status.ClusterStatus{"c3": unit("sha256:v1", "sha256:v1")},
			"c3 gets unit v1 (its last unit Ready there)"},
		{"Ready only at content not kept", map[string]*status.ClusterStatus{"a1": unit("sha256:v3", "sha256:v3", "sha256:v0")},
			"a1 gets unit v2 (no kept unit was Ready there: the unit it had when the rollout started)"},
		{"no status", nil, "a1 gets unit v2 (no trusted status: the unit it had when the rollout started)"},
		{"an older agent", map[string]*status.ClusterStatus{"a1": unit("sha256:v3")},
			"a1 gets unit v2 (its status does not say which contents were Ready there (an older agent): the unit it had when the rollout started)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			choices := ChooseAbort(st, "web", current, tc.docs)
			var got []string
			for _, c := range choices {
				got = append(got, c.String())
			}
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Errorf("choices:\n%s\nwant %q", strings.Join(got, "\n"), tc.want)
			}
			aborted := *st
			aborted.Restore = Restore(st, choices)
			for _, c := range choices {
				if aborted.AbortTarget(c.Cluster) != c.Hash {
					t.Errorf("%s: AbortTarget %s, chosen %s", c.Cluster, aborted.AbortTarget(c.Cluster), c.Hash)
				}
				if c.Hash == current[c.Cluster] && c.Hash != st.Previous[c.Cluster] {
					t.Errorf("%s: abort gives it the content being aborted", c.Cluster)
				}
			}
			if want, got := "a1 gets unit "+shortHash(aborted.AbortTarget("a1")), aborted.AbortTargets(); !strings.HasPrefix(got, want) {
				t.Errorf("AbortTargets %q, want it to start with %q", got, want)
			}
		})
	}
}

func TestParseAbortFields(t *testing.T) {
	ok := &State{APIVersion: APIVersion, Kind: Kind, Application: "web", Revision: "sha256:a", Released: 1, Waves: 2, Aborted: true,
		Previous: map[string]string{"a1": "sha256:v2"}, Earlier: map[string][]string{"a1": {"sha256:v1"}}, Restore: map[string]string{"a1": "sha256:v1"}}
	data, err := Marshal(ok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(data); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if got := ok.Kept(); strings.Join(got, " ") != "sha256:v1 sha256:v2" {
		t.Errorf("kept %v", got)
	}
	for name, tc := range map[string]struct{ edit func(*State) string }{
		"restore not kept":         {func(s *State) string { s.Restore["a1"] = "sha256:v9"; return "not a unit kept" }},
		"earlier without previous": {func(s *State) string { s.Earlier["b2"] = []string{"sha256:v1"}; return "not in previous" }},
		"bad earlier hash":         {func(s *State) string { s.Earlier["a1"] = []string{"../x"}; return "earlier a1" }},
	} {
		t.Run(name, func(t *testing.T) {
			s := *ok
			s.Restore, s.Earlier = map[string]string{"a1": "sha256:v1"}, map[string][]string{"a1": {"sha256:v1"}}
			detail := tc.edit(&s)
			data, err := Marshal(&s)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(data); !errors.Is(err, ErrInvalidState) || !strings.Contains(err.Error(), detail) {
				t.Fatalf("want ErrInvalidState naming %q, got %v", detail, err)
			}
		})
	}
}
