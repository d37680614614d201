package fleet

import "testing"

func TestWithArticle(t *testing.T) {
	for in, want := range map[string]string{
		"Cluster": "a Cluster", "Application": "an Application", "alias": "an alias",
		"list": "a list", "": "a ",
	} {
		if got := withArticle(in); got != want {
			t.Errorf("withArticle(%q) = %q, want %q", in, got, want)
		}
	}
}
