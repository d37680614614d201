package cmd

import "testing"

func TestGitMaxFetchSize(t *testing.T) {
	for flag, want := range map[string]int64{"512Mi": 512 << 20, "16Mi": 16 << 20, "1G": 1e9} {
		if got, err := gitMaxFetchSize(flag); err != nil || got != want {
			t.Errorf("gitMaxFetchSize(%q) = %d, %v; want %d", flag, got, err, want)
		}
	}
	for _, flag := range []string{"", "0", "-1Mi", "lots"} {
		if _, err := gitMaxFetchSize(flag); err == nil {
			t.Errorf("gitMaxFetchSize(%q): no error", flag)
		}
	}
}
