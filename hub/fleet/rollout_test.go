package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rolloutRepo is baseRepo with four clusters (a1, b2, c3, d4; b2 and d4
// labelled ring=late) in fleet prod, whose spec ends with fleetRollout.
func rolloutRepo(fleetRollout string, changes map[string]string) map[string]string {
	files := map[string]string{
		"clusters/member1.yaml": "",
		"clusters/member2.yaml": "",
		"fleets/prod.yaml":      "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\nspec:\n  clusters: [a1, b2, c3, d4]\n" + fleetRollout,
	}
	for _, c := range []string{"a1", "b2", "c3", "d4"} {
		labels := ""
		if c == "b2" || c == "d4" {
			labels = "  labels: {ring: late}\n"
		}
		files["clusters/"+c+".yaml"] = "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + c + "\n" + labels
	}
	for k, v := range changes {
		files[k] = v
	}
	return files
}

// TestRolloutErrors: each bad rollout is one precise error naming
// file:line: field and its class.
func TestRolloutErrors(t *testing.T) {
	const head = "  rollout:\n    waves:\n"
	tests := []struct {
		name    string
		rollout string // appended to fleets/prod.yaml
		changes map[string]string
		want    string
		class   error
		detail  string
	}{
		{
			name:    "unknown cluster in a wave",
			rollout: head + "      - clusters: [a1, zz]\n",
			want:    "fleets/prod.yaml:9: spec.rollout.waves[0].clusters[1]", class: ErrDanglingReference, detail: `no cluster named "zz"`,
		},
		{
			name:    "cluster outside the fleet",
			rollout: head + "      - clusters: [a1]\n      - clusters:\n          - member9\n",
			changes: map[string]string{"clusters/member9.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: member9\n"},
			want:    "fleets/prod.yaml:11: spec.rollout.waves[1].clusters[0]", class: ErrInvalidValue, detail: `cluster "member9" is not in fleet prod`,
		},
		{
			name:    "overlapping waves",
			rollout: head + "      - clusters: [b2]\n      - selector:\n          matchLabels: {ring: late}\n",
			want:    "fleets/prod.yaml:10: spec.rollout.waves[1].selector", class: ErrDuplicate, detail: `cluster "b2" is already in the wave at spec.rollout.waves[0].clusters[0]`,
		},
		{
			name:    "percentages over 100",
			rollout: head + "      - percent: 50\n      - percent: 30\n      - percent: 40\n",
			want:    "fleets/prod.yaml:11: spec.rollout.waves[2].percent", class: ErrInvalidValue, detail: "add up to 120%, more than 100%",
		},
		{
			name:    "percent out of range",
			rollout: head + "      - percent: 0\n",
			want:    "fleets/prod.yaml:9: spec.rollout.waves[0].percent", class: ErrInvalidValue, detail: "0 is not between 1 and 100",
		},
		{
			name:    "bake not a duration",
			rollout: head + "      - count: 1\n    bake: 10 minutes\n",
			want:    "fleets/prod.yaml:10: spec.rollout.bake", class: ErrInvalidValue, detail: `unknown unit " minutes" in duration "10 minutes"`,
		},
		{
			name:    "bake negative",
			rollout: head + "      - count: 1\n    bake: -5m\n",
			want:    "fleets/prod.yaml:10: spec.rollout.bake", class: ErrInvalidValue, detail: "must not be negative",
		},
		{
			name:    "maxFailures negative",
			rollout: head + "      - count: 1\n        maxFailures: -1\n",
			want:    "fleets/prod.yaml:10: spec.rollout.waves[0].maxFailures", class: ErrInvalidValue, detail: "-1 must not be negative",
		},
		{
			name:    "rollout maxFailures negative",
			rollout: "  rollout:\n    maxFailures: -2\n    waves: [{count: 1}]\n",
			want:    "fleets/prod.yaml:8: spec.rollout.maxFailures", class: ErrInvalidValue, detail: "-2 must not be negative",
		},
		{
			name:    "count not positive",
			rollout: head + "      - count: 0\n",
			want:    "fleets/prod.yaml:9: spec.rollout.waves[0].count", class: ErrInvalidValue, detail: "at least 1",
		},
		{
			name:    "wave selects nothing",
			rollout: head + "      - name: canary\n",
			want:    "fleets/prod.yaml:9: spec.rollout.waves[0]", class: ErrRequired, detail: "set one of clusters, selector, percent or count",
		},
		{
			name:    "wave selects two ways",
			rollout: head + "      - {count: 1, percent: 10}\n",
			want:    "fleets/prod.yaml:9: spec.rollout.waves[0]", class: ErrInvalidValue, detail: "set only one",
		},
		{
			name:    "no waves",
			rollout: "  rollout:\n    bake: 1m\n",
			want:    "fleets/prod.yaml:7: spec.rollout", class: ErrRequired, detail: "at least one wave",
		},
		{
			name:    "duplicate wave name",
			rollout: head + "      - {name: canary, count: 1}\n      - {name: canary, count: 1}\n",
			want:    "fleets/prod.yaml:10: spec.rollout.waves[1].name", class: ErrDuplicate, detail: `wave "canary" is already declared at spec.rollout.waves[0]`,
		},
		{
			name:    "wave named rest",
			rollout: head + "      - {name: rest, count: 1}\n",
			want:    "fleets/prod.yaml:9: spec.rollout.waves[0].name", class: ErrInvalidValue, detail: "implicit last wave",
		},
		{
			name: "application wave outside its destinations",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource +
				"  syncPolicies:\n    - destination: {clusters: [a1, b2]}\n  rollout:\n    waves:\n      - clusters: [c3]\n")},
			want: "apps/web/app.yaml:13: spec.rollout.waves[0].clusters[0]", class: ErrInvalidValue, detail: `cluster "c3" is not in the application's destinations`,
		},
		{
			name:    "two fleets' rollouts",
			rollout: head + "      - count: 1\n",
			changes: map[string]string{
				"fleets/late.yaml":  "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: late\nspec:\n  selector: {matchLabels: {ring: late}}\n  rollout: {waves: [{count: 1}]}\n",
				"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination: {fleet: prod}\n    - destination: {fleet: late}\n"),
			},
			want: "apps/web/app.yaml:9: spec.syncPolicies", class: ErrInvalidValue, detail: "fleets late and prod both declare a rollout",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(context.Background(), writeRepo(t, rolloutRepo(tc.rollout, tc.changes)))
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %v is not an ErrorList", err)
			}
			if len(list) != 1 {
				t.Fatalf("want exactly one problem, got %d:\n%v", len(list), err)
			}
			msg := list[0].Error()
			if !strings.HasPrefix(msg, tc.want) || !strings.Contains(msg, tc.detail) {
				t.Errorf("message %q\nwant prefix %q and %q", msg, tc.want, tc.detail)
			}
			if !errors.Is(list[0], tc.class) {
				t.Errorf("errors.Is(%v, %v) = false", list[0], tc.class)
			}
		})
	}
}

// TestResolveWaves: explicit waves take their clusters, percent and count
// waves then take the rest by name, clusters in no wave go last.
func TestResolveWaves(t *testing.T) {
	tests := []struct {
		name    string
		rollout string
		app     string // syncPolicies and rollout of apps/web/app.yaml
		fleets  map[string]string
		want    string
	}{
		{
			name:    "explicit, selector, rest",
			rollout: "  rollout:\n    maxFailures: 1\n    waves:\n      - {name: canary, clusters: [c3]}\n      - {selector: {matchLabels: {ring: late}}, maxFailures: 0}\n",
			want:    "canary=c3/1 wave-2=b2,d4/0 rest=a1/1",
		},
		{
			name:    "percent rounds up, count takes the next by name",
			rollout: "  rollout:\n    waves:\n      - percent: 10\n      - count: 2\n      - percent: 90\n",
			want:    "wave-1=a1/0 wave-2=b2,c3/0 wave-3=d4/0",
		},
		{
			name:    "explicit waves are taken before percentages",
			rollout: "  rollout:\n    waves:\n      - percent: 50\n      - {clusters: [a1]}\n",
			want:    "wave-1=b2,c3/0 wave-2=a1/0 rest=d4/0",
		},
		{
			name:    "an exhausted pool leaves a wave empty",
			rollout: "  rollout:\n    waves:\n      - count: 9\n      - count: 1\n",
			want:    "wave-1=a1,b2,c3,d4/0 wave-2=/0",
		},
		{
			name:   "a fleet's rollout over all of an application's destinations",
			fleets: map[string]string{"fleets/late.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: late\nspec:\n  selector: {matchLabels: {ring: late}}\n  rollout:\n    waves: [{clusters: [b2]}, {percent: 50}]\n"},
			app:    "  syncPolicies:\n    - destination: {fleet: late}\n    - destination: {clusters: [a1]}\n",
			want:   "wave-1=b2/0 wave-2=a1,d4/0",
		},
		{
			name:    "the application's own rollout wins",
			rollout: "  rollout:\n    waves: [{clusters: [a1]}]\n",
			app:     "  syncPolicies:\n    - destination: {fleet: prod}\n  rollout:\n    waves: [{name: first, clusters: [d4]}]\n",
			want:    "first=d4/0 rest=a1,b2,c3/0",
		},
		{
			name: "no rollout",
			want: "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			changes := map[string]string{}
			for k, v := range tc.fleets {
				changes[k] = v
			}
			if tc.app != "" {
				changes["apps/web/app.yaml"] = app(manifestsSource + tc.app)
			}
			r, err := Load(context.Background(), writeRepo(t, rolloutRepo(tc.rollout, changes)))
			if err != nil {
				t.Fatal(err)
			}
			if got := formatWaves(r.Waves(r.Application("web"))); got != tc.want {
				t.Errorf("waves = %q, want %q", got, tc.want)
			}
		})
	}
}

func formatWaves(ws []ResolvedWave) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%s=%s/%d", w.Name, strings.Join(w.Clusters, ","), w.MaxFailures))
	}
	return strings.Join(parts, " ")
}

// FuzzResolveWaves: whatever the waves, every member lands in exactly one
// wave, the result does not depend on the members' order, and it is the
// same twice.
func FuzzResolveWaves(f *testing.F) {
	f.Add(uint8(7), uint8(10), uint8(2), uint8(50), uint8(3))
	f.Add(uint8(0), uint8(100), uint8(0), uint8(0), uint8(1))
	f.Add(uint8(200), uint8(33), uint8(5), uint8(33), uint8(0))
	f.Fuzz(func(t *testing.T, n, p1, count, p2, explicit uint8) {
		r := &Repo{}
		var members []*Cluster
		for i := range int(n) {
			c := &Cluster{Metadata: ObjectMeta{Name: fmt.Sprintf("c%03d", (i*37)%256), Labels: map[string]string{"odd": fmt.Sprint(i%2 == 1)}}}
			r.Clusters = append(r.Clusters, c)
			members = append(members, c)
		}
		members = uniqueSorted(members)
		pct := func(v uint8) *int32 { x := int32(v%101) + 1; return &x }
		cnt := int32(count)
		ro := &Rollout{Waves: []Wave{{Percent: pct(p1)}, {Count: &cnt}, {Selector: selectorOdd()}, {Percent: pct(p2)}}}
		if explicit > 0 && len(members) > 0 {
			ro.Waves = append(ro.Waves, Wave{Clusters: []string{members[int(explicit)%len(members)].Metadata.Name}})
		}
		got := r.ResolveWaves(ro, members)
		reversed := make([]*Cluster, len(members))
		for i, c := range members {
			reversed[len(members)-1-i] = c
		}
		if again := formatWaves(r.ResolveWaves(ro, reversed)); again != formatWaves(got) {
			t.Fatalf("order-dependent:\n%s\n%s", formatWaves(got), again)
		}
		seen := map[string]int{}
		for _, w := range got {
			for _, c := range w.Clusters {
				seen[c]++
			}
		}
		for _, c := range members {
			if seen[c.Metadata.Name] != 1 {
				t.Fatalf("cluster %s is in %d waves: %s", c.Metadata.Name, seen[c.Metadata.Name], formatWaves(got))
			}
		}
		if len(seen) != len(members) {
			t.Fatalf("waves name %d clusters, members are %d", len(seen), len(members))
		}
	})
}

func selectorOdd() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"odd": "true"}}
}
