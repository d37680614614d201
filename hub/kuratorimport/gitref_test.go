package kuratorimport

import (
	"strings"
	"testing"
)

// TestGitRefs: Flux's GitRepositoryRef becomes spec.source.git.ref in
// Flux's precedence; what Flotilla cannot pin leaves the application out
// with a warning naming file, line and field.
func TestGitRefs(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	cases := []struct {
		name, ref string
		want      string // in apps/a/app.yaml; empty: not imported
		warning   string
	}{
		{"no ref is Flux's default branch", "", "ref:\n        branch: master\n", ""},
		{"branch", "ref: {branch: dev}", "ref:\n        branch: dev\n", ""},
		{"tag", "ref: {tag: v1.2.0, branch: dev}", "ref:\n        tag: v1.2.0\n", ""},
		{"commit wins", "ref: {commit: " + commit + ", branch: dev}", "ref:\n        commit: " + commit + "\n", ""},
		{"name of a branch", "ref: {name: refs/heads/release}", "ref:\n        branch: release\n", ""},
		{"name of a tag", "ref: {name: refs/tags/v2}", "ref:\n        tag: v2\n", ""},
		{"name of a pull request", "ref: {name: refs/pull/1/head}", "", "in.yaml:19: spec.source.gitRepository.ref: action needed: application not imported: reference \"refs/pull/1/head\""},
		{"semver", "ref: {semver: \">=1.0.0\"}", "", "in.yaml:19: spec.source.gitRepository.ref: action needed: application not imported: semver range"},
		{"short commit", "ref: {commit: abc123}", "", "in.yaml:19: spec.source.gitRepository.ref: action needed: application not imported: commit \"abc123\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The ref is on line 19, after the fleet's 11 lines.
			in := testFleet + "---\napiVersion: apps.kurator.dev/v1alpha1\nkind: Application\nmetadata: {name: a}\nspec:\n  source:\n    gitRepository:\n      url: https://git.example.com/a.git\n      " + tc.ref + "\n" +
				"  syncPolicies:\n  - destination: {fleet: f}\n    kustomization: {path: ./deploy, prune: true}\n"
			res, err := Convert(map[string][]byte{"in.yaml": []byte(in)}, []string{"in.yaml"})
			if err != nil {
				t.Fatal(err)
			}
			app, ok := res.Files["apps/a/app.yaml"]
			if tc.want == "" {
				if ok {
					t.Fatalf("imported:\n%s", app)
				}
				if len(res.Warnings) == 0 || !strings.Contains(res.Warnings.Error(), tc.warning) {
					t.Fatalf("warnings:\n%v\nwant %q", res.Warnings, tc.warning)
				}
				return
			}
			for _, w := range []string{tc.want, "url: https://git.example.com/a.git", "path: deploy", "kustomize:\n      path: .\n"} {
				if !strings.Contains(string(app), w) {
					t.Errorf("app.yaml lacks %q:\n%s", w, app)
				}
			}
		})
	}
}
