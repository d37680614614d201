package version

import "testing"

func TestModuleVersion(t *testing.T) {
	for _, tc := range []struct{ recorded, want string }{
		{"", "dev"},
		{"(devel)", "dev"},
		{"v0.1.0", "v0.1.0"},
		{"v0.0.0-20261206041042-8e297ee0a1b2", "v0.0.0-20261206041042-8e297ee0a1b2"},
	} {
		if got := moduleVersion(tc.recorded, "dev"); got != tc.want {
			t.Errorf("moduleVersion(%q) = %q, want %q", tc.recorded, got, tc.want)
		}
	}
}
