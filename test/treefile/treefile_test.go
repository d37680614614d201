package treefile

import (
	"maps"
	"testing"
)

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"a.yaml": "a: 1\n", "apps/web/app.yaml": "kind: Application\n", "rendered/x/slice.yaml": "units: []\n"}
	Write(t, dir, files)
	tests := []struct {
		under []string
		want  map[string]string
	}{
		{nil, files},
		{[]string{"apps", "a.yaml"}, map[string]string{"a.yaml": "a: 1\n", "apps/web/app.yaml": "kind: Application\n"}},
		{[]string{"rendered/x"}, map[string]string{"rendered/x/slice.yaml": "units: []\n"}},
	}
	for _, tt := range tests {
		if got := Read(t, dir, tt.under...); !maps.Equal(got, tt.want) {
			t.Errorf("Read(%v): %v, want %v", tt.under, got, tt.want)
		}
	}
}
