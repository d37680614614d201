package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func gitApp(git, kind string) string {
	return app("  source:\n    git:\n" + git + kind + "  syncPolicies: [{destination: {fleet: prod}}]\n")
}

const kustomizeDot = "    kustomize:\n      path: .\n"

// TestGitSourceValid: a Git source loads before it is vendored (render
// vendors it), with any kind and a path inside the source.
func TestGitSourceValid(t *testing.T) {
	for _, src := range []string{
		gitApp("      url: https://git.example.com/team/podinfo.git\n      ref: {branch: release/1.x}\n      path: deploy\n", kustomizeDot),
		gitApp("      url: git@github.com:team/podinfo.git\n      ref: {tag: v6.5.0}\n", "    manifests:\n      path: manifests\n"),
		gitApp("      url: ssh://git@git.example.com/podinfo.git\n      ref: {commit: 0123456789abcdef0123456789abcdef01234567}\n", "    helm:\n      path: charts/podinfo\n      values: {replicas: 2}\n"),
	} {
		r, err := Load(context.Background(), writeRepo(t, map[string]string{"apps/web/app.yaml": src}))
		if err != nil {
			t.Fatalf("%s\n%v", src, err)
		}
		if g := r.Applications[0].Spec.Source.Git; g == nil || g.URL == "" {
			t.Fatalf("git source not decoded: %+v", r.Applications[0].Spec.Source)
		}
	}
}

// TestGitSourceErrors asserts file:line: field, class and detail of each
// problem a Git source can have.
func TestGitSourceErrors(t *testing.T) {
	const url = "      url: https://git.example.com/podinfo.git\n"
	tests := []struct {
		name   string
		src    string
		want   string
		class  error
		detail string
	}{
		{"no url", gitApp("      ref: {branch: main}\n", kustomizeDot), "apps/web/app.yaml:7: spec.source.git.url", ErrRequired, "URL"},
		{"file url", gitApp("      url: file:///etc\n      ref: {branch: main}\n", kustomizeDot), "apps/web/app.yaml:8: spec.source.git.url", ErrInvalidValue, "not an https://"},
		{"credentials in url", gitApp("      url: https://bob:hunter2@git.example.com/p.git\n      ref: {branch: main}\n", kustomizeDot), "apps/web/app.yaml:8: spec.source.git.url", ErrInvalidValue, "--source-credentials-dir"},
		{"no ref", gitApp(url, kustomizeDot), "apps/web/app.yaml:7: spec.source.git.ref", ErrRequired, "branch, tag or commit"},
		{"two refs", gitApp(url+"      ref: {branch: main, tag: v1}\n", kustomizeDot), "apps/web/app.yaml:9: spec.source.git.ref", ErrInvalidValue, "only one"},
		{"short commit", gitApp(url+"      ref: {commit: abc123}\n", kustomizeDot), "apps/web/app.yaml:9: spec.source.git.ref.commit", ErrInvalidValue, "40-character"},
		{"bad branch", gitApp(url+"      ref:\n        branch: a..b\n", kustomizeDot), "apps/web/app.yaml:10: spec.source.git.ref.branch", ErrInvalidValue, "branch name"},
		{"path leaves", gitApp(url+"      ref: {branch: main}\n      path: ../x\n", kustomizeDot), "apps/web/app.yaml:10: spec.source.git.path", ErrInvalidValue, "leaves the Git source"},
		{"kind path leaves", gitApp(url+"      ref: {branch: main}\n", "    kustomize:\n      path: a/../../b\n"), "apps/web/app.yaml:11: spec.source.kustomize.path", ErrInvalidValue, "leaves the Git source"},
		{"helm repo with git", gitApp(url+"      ref: {branch: main}\n", "    helm:\n      repo: https://charts.example.com\n      chart: x\n"), "apps/web/app.yaml:11: spec.source.helm.repo", ErrInvalidValue, "either path"},
		{"no kind", gitApp(url+"      ref: {branch: main}\n", ""), "apps/web/app.yaml:6: spec.source", ErrRequired, "kustomize, manifests or helm"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(context.Background(), writeRepo(t, map[string]string{"apps/web/app.yaml": tc.src}))
			var list ErrorList
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("want exactly one problem, got %v", err)
			}
			msg := list[0].Error()
			if !strings.HasPrefix(msg, tc.want) || !strings.Contains(msg, tc.detail) || !errors.Is(list[0], tc.class) {
				t.Errorf("got %q\nwant %q … %q (%v)", msg, tc.want, tc.detail, tc.class)
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("the password is in the message: %s", msg)
			}
		})
	}
}
