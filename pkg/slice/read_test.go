package slice

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func sampleSlice() *Slice {
	h := "sha256:" + strings.Repeat("ab", 32)
	return &Slice{
		APIVersion: APIVersion, Kind: Kind, Cluster: "edge-1",
		Units: []Unit{
			{Name: UnitNamespaces, Kind: UnitManifests, Path: UnitDir("edge-1", UnitNamespaces), Prune: true, Wait: true,
				Timeout: metav1.Duration{Duration: 5 * time.Minute}, Hash: h},
			{Name: "db", Kind: UnitHelm, Path: UnitDir("edge-1", "db"),
				Helm:      &HelmRelease{Chart: "charts/mysql-db/0.1.0", ReleaseName: "db", Values: UnitDir("edge-1", "db") + "/values.yaml"},
				DependsOn: []string{UnitNamespaces}, Prune: true, AllowEmpty: true, Wait: false,
				Timeout: metav1.Duration{Duration: 90 * time.Second}, Namespace: "shop", Hash: h},
			{Name: "web", Kind: UnitKustomize, Path: UnitDir("edge-1", "web"), DependsOn: []string{"db", UnitNamespaces},
				Timeout: metav1.Duration{Duration: time.Hour}, Namespace: "on", Hash: h, WaitForTimeout: true,
				HealthChecks: []HealthCheck{
					{APIVersion: "example.com/v1", Kind: "Widget", Current: `status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')`,
						InProgress: "status.phase == \"Pending\"", Failed: "status.phase: 'x'\n# not a comment"},
					{APIVersion: "batch.volcano.sh/v1alpha1", Current: "true"},
				}},
		},
	}
}

// TestSliceRoundTrip: what Marshal writes, Parse reads back equal.
func TestSliceRoundTrip(t *testing.T) {
	s := sampleSlice()
	data := Marshal(s)
	if !strings.HasPrefix(string(data), GeneratedHeader+"\n") {
		t.Fatalf("no header:\n%s", data)
	}
	got, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, data)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, s)
	}
	empty := &Slice{APIVersion: APIVersion, Kind: Kind, Cluster: "c"}
	got, err = Parse(Marshal(empty))
	if err != nil || got.Cluster != "c" || len(got.Units) != 0 {
		t.Fatalf("empty slice: %+v, %v", got, err)
	}
	empty.Decommission = true
	got, err = Parse(Marshal(empty))
	if err != nil || !got.Decommission || len(got.Units) != 0 {
		t.Fatalf("decommissioned slice: %+v, %v", got, err)
	}
}

func TestRead(t *testing.T) {
	root := t.TempDir()
	s := sampleSlice()
	p := filepath.Join(root, filepath.FromSlash(SlicePath("edge-1")))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, Marshal(s), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(root, "edge-1")
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	// A slice.yaml copied to another cluster's place is refused.
	other := filepath.Join(root, filepath.FromSlash(SlicePath("edge-2")))
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, Marshal(s), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(root, "edge-2"); !errors.Is(err, ErrInvalidSlice) {
		t.Errorf("Read of a misplaced slice: %v", err)
	}
	if _, err := Read(root, "missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read of a missing slice: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	good := string(Marshal(sampleSlice()))
	tests := []struct {
		name, from, to string
	}{
		{"unknown field", "cluster: edge-1\n", "cluster: edge-1\nextra: 1\n"},
		{"duplicate field", "cluster: edge-1\n", "cluster: edge-1\ncluster: edge-1\n"},
		{"wrong kind", "kind: Slice", "kind: Fleet"},
		{"wrong apiVersion", "apiVersion: flotilla.dev/v1alpha1", "apiVersion: v1"},
		{"unknown unit kind", "kind: kustomize", "kind: jsonnet"},
		{"path elsewhere", "path: rendered/df/edge-1/web", "path: rendered/df/edge-1/../../x"},
		{"dependency later in the list", "  - db\n  - flotilla-namespaces\n", "  - db\n  - zzz\n"},
		{"bad hash", "hash: sha256:abab", "hash: md5:abab"},
		{"helm without helm field", "kind: kustomize", "kind: helm"},
		{"values elsewhere", "values: rendered/df/edge-1/db/values.yaml", "values: /etc/passwd"},
		{"chart outside", "chart: charts/mysql-db/0.1.0", "chart: ../charts"},
		{"zero timeout", "timeout: 1h0m0s", "timeout: 0s"},
		{"invalid cluster name", "cluster: edge-1", "cluster: Edge_1"},
		{"not yaml", "units:", "units: ["},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(good, tt.from, tt.to, 1)
			if bad == good {
				t.Fatalf("%q not found in the sample", tt.from)
			}
			if _, err := Parse([]byte(bad)); !errors.Is(err, ErrInvalidSlice) {
				t.Errorf("Parse accepted it (err %v):\n%s", err, bad)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Marshal(sampleSlice()))
	f.Add([]byte("apiVersion: flotilla.dev/v1alpha1\nkind: Slice\ncluster: a\nunits: []\n"))
	f.Add([]byte("units: [{name: a, dependsOn: [a]}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		// Whatever parses is valid and survives a round trip.
		again, err := Parse(Marshal(s))
		if err != nil {
			t.Fatalf("re-parse of a valid slice: %v", err)
		}
		if len(s.Units) == 0 && len(again.Units) == 0 {
			s.Units, again.Units = nil, nil // "units: []" and no units are the same
		}
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip differs: %+v vs %+v", again, s)
		}
	})
}

func TestQuoteScalar(t *testing.T) {
	tests := []struct{ in, want string }{
		{"member1", "member1"},
		{"rendered/44/member1/nginx", "rendered/44/member1/nginx"},
		{"sha256:abc", "sha256:abc"},
		{"5m0s", "5m0s"},
		{"256Mi", "256Mi"},
		{"1.27", `"1.27"`},
		{"1.27-alpine", `"1.27-alpine"`},
		{"0x1F", `"0x1F"`},
		{"1e5", `"1e5"`},
		{"0b1", `"0b1"`},
		{"2001-12-14", `"2001-12-14"`},
		{"12:30", `"12:30"`},
		{"../../apps/x", "../../apps/x"},
		{"...", `"..."`},
		{".5", `".5"`},
		{"true", `"true"`},
		{"No", `"No"`},
		{"~", `"~"`},
		{"", `""`},
		{".inf", `".inf"`},
		{"1e3", `"1e3"`},
		{"a: b", `"a: b"`},
		{"a:", `"a:"`},
		{"#x", `"#x"`},
		{"x #y", `"x #y"`},
		{"line\nbreak", `"line\nbreak"`},
		{"ünïcode", `"ünïcode"`},
	}
	for _, tt := range tests {
		if got := QuoteScalar(tt.in); got != tt.want {
			t.Errorf("QuoteScalar(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestRepoPaths(t *testing.T) {
	s := sampleSlice()
	s.Units[2].Inputs = []Input{{Path: "apps/web/manifests"}, {Path: "apps/web", Except: "app.yaml"}, {Path: "bases/common"}}
	got := s.RepoPaths()
	want := []string{"apps/web", "bases/common", "charts/mysql-db/0.1.0", ClusterDir("edge-1")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RepoPaths = %v, want %v", got, want)
	}
}

func TestRepoExclusions(t *testing.T) {
	tests := []struct {
		name   string
		inputs []Input
		want   []string
	}{
		{"an application's app.yaml left out of its hash", []Input{{Path: "apps/web/manifests"}, {Path: "apps/web", Except: "app.yaml"}}, []string{"apps/web/app.yaml"}},
		{"another input reads the whole directory", []Input{{Path: "apps/web", Except: "app.yaml"}, {Path: "apps/web"}}, nil},
		{"another input reads the file", []Input{{Path: "apps/web", Except: "app.yaml"}, {Path: "apps/web/app.yaml"}}, nil},
		{"an input on a parent reads it", []Input{{Path: "apps/web", Except: "app.yaml"}, {Path: "apps"}}, nil},
		{"inputs leave out different entries", []Input{{Path: "apps/web", Except: "app.yaml"}, {Path: "apps/web", Except: "values.yaml"}}, nil},
		{"no except", []Input{{Path: "apps/web"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sampleSlice()
			s.Units[2].Inputs = tt.inputs
			if got := s.RepoExclusions(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("RepoExclusions = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestHashDirExceptMissing: a directory that held only the skipped entry,
// which a published slice leaves out whole, hashes as it does in main.
func TestHashDirExceptMissing(t *testing.T) {
	main, sliced := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(main, "apps", "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(main, "apps", "db", "app.yaml"), []byte("kind: Application\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := NewTreeHasher(main).HashDirExcept("apps/db", "app.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := NewTreeHasher(sliced).HashDirExcept("apps/db", "app.yaml"); err != nil || got != want {
		t.Fatalf("missing directory: %s, %v; want %s", got, err, want)
	}
	if _, err := NewTreeHasher(sliced).HashDirExcept("apps/db", ""); err == nil {
		t.Fatal("a missing directory without a skipped entry must be an error")
	}
}
