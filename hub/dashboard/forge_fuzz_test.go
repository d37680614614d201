package dashboard

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzLinkerFor: any remote gives no link, or a link to a commit page on
// github.com or gitlab.com that carries the hash as its last segment and
// nothing of the remote's credentials.
func FuzzLinkerFor(f *testing.F) {
	for _, s := range []string{"https://github.com/a/b.git", "git@gitlab.com:g/s/r.git", "ssh://u:p@github.com/a/b", "/srv/fleet", "https://x@github.com/a/b?c#d", "github.com:a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, repo string) {
		l := LinkerFor(repo, "")
		if l == nil {
			return
		}
		got := l("abc123")
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("LinkerFor(%q) links to %q: %v", repo, got, err)
		}
		if u.Scheme != "https" || (u.Host != "github.com" && u.Host != "gitlab.com") || u.User != nil || !strings.HasSuffix(got, "/commit/abc123") {
			t.Fatalf("LinkerFor(%q) links to %q", repo, got)
		}
	})
}
