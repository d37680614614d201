package plan

import "testing"

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 clusters", 1: "1 cluster", 2: "2 clusters"} {
		if got := plural(n, "cluster", "clusters"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}
