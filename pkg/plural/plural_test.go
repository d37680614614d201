package plural

import "testing"

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 clusters", 1: "1 cluster", 2: "2 clusters", -1: "-1 clusters"} {
		if got := Count(n, "cluster", "clusters"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
