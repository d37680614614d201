package status

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// sampleDoc is a document with every part filled in.
func sampleDoc() *ClusterStatus {
	start := metav1.NewTime(t0.Add(-time.Hour))
	return &ClusterStatus{
		Cluster:           "member1",
		Agent:             Agent{Version: "v0.1.0", Identity: "flotilla-agent-0"},
		KubernetesVersion: "v1.36.3",
		APIVersions:       []string{"v1", "apps/v1", "batch.volcano.sh/v1alpha1"},
		DesiredRevision:   "main@sha1:1111111111111111111111111111111111111111",
		FetchedRevision:   "main@sha1:1111111111111111111111111111111111111111",
		AppliedRevision:   "main@sha1:1111111111111111111111111111111111111111",
		Conditions: []metav1.Condition{
			{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonSucceeded, Message: "Applied revision: main@sha1:1111111111111111111111111111111111111111", LastTransitionTime: metav1.NewTime(t0)},
		},
		Units: []UnitStatus{
			{Name: "web", Hash: "sha256:aa", AppliedRevision: "main@sha1:1111111111111111111111111111111111111111", Objects: 3,
				Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonSucceeded, LastTransitionTime: metav1.NewTime(t0)}}},
			{Name: "api", Hash: "sha256:bb", AppliedRevision: "main@sha1:1111111111111111111111111111111111111111", Objects: 2, DriftCorrections: 1,
				Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonSucceeded, LastTransitionTime: metav1.NewTime(t0)}}},
		},
		Jobs: []JobStatus{{Name: "train", Namespace: "ml", Unit: "job-train", Phase: "Running", Running: 2, StartTime: &start}},
		Capacity: &Capacity{
			ReadyNodes:  3,
			Allocatable: map[string]string{"cpu": "12", "memory": "48Gi", "nvidia.com/gpu": "8"},
			Free:        map[string]string{"cpu": "4"},
			Queues:      []QueueCapacity{{Name: "default", State: "Open", Allocated: map[string]string{"cpu": "2"}}},
		},
		Heartbeat: metav1.NewTime(t0),
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	doc := sampleDoc()
	data, err := Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if !strings.HasPrefix(text, "apiVersion: flotilla.dev/v1alpha1\nkind: ClusterStatus\ncluster: member1\n") {
		t.Errorf("document does not start with its identity in field order:\n%s", text)
	}
	if strings.ContainsAny(text, "{[") {
		t.Errorf("document is not block YAML:\n%s", text)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, text)
	}
	want := Normalized(doc)
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("round trip changed the document\n got: %+v\nwant: %+v", got, want)
	}
	if doc.APIVersion != "" {
		t.Error("Encode modified its argument")
	}
}

func TestEncodeIsDeterministic(t *testing.T) {
	a := sampleDoc()
	b := sampleDoc()
	// Same content, other order: the bytes must not differ.
	b.Units[0], b.Units[1] = b.Units[1], b.Units[0]
	b.APIVersions = []string{"batch.volcano.sh/v1alpha1", "v1", "apps/v1"}
	ea, err := Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		eb, err := Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ea, eb) {
			t.Fatalf("encodings differ:\n%s\n---\n%s", ea, eb)
		}
	}
	if i, j := bytes.Index(ea, []byte("name: api")), bytes.Index(ea, []byte("name: web")); i < 0 || j < 0 || i > j {
		t.Errorf("units are not sorted by name:\n%s", ea)
	}
}

func TestEncodeQuotesStringsThatLookLikeOtherTypes(t *testing.T) {
	doc := sampleDoc()
	doc.LastError = "true"
	doc.Agent.Identity = "123"
	data, err := Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if got.LastError != "true" || got.Agent.Identity != "123" {
		t.Errorf("strings changed type: %q %q\n%s", got.LastError, got.Agent.Identity, data)
	}
}

// TestProgressVersion: a document with progress is v1alpha3, so a hub
// that does not know the field says so rather than an unknown field.
func TestProgressVersion(t *testing.T) {
	doc := sampleDoc()
	doc.Progress = &Progress{Phase: PhaseUnits, Started: metav1.NewTime(t0), Units: []UnitProgress{{Name: "web", Since: metav1.NewTime(t0)}}}
	data, err := Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "apiVersion: "+APIVersionV1Alpha3+"\n") {
		t.Fatalf("a document with progress is not %s:\n%s", APIVersionV1Alpha3, data)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, Normalized(doc)) {
		t.Errorf("round trip changed the document\n got: %+v\nwant: %+v", got.Progress, doc.Progress)
	}
	old := strings.Replace(string(data), APIVersionV1Alpha3, APIVersion, 1)
	if _, err := Decode([]byte(old)); !errors.Is(err, ErrInvalidDocument) {
		t.Errorf("progress under %s: %v, want ErrInvalidDocument", APIVersion, err)
	}
	if s := got.Progress.String(); !strings.Contains(s, "units: web since ") {
		t.Errorf("Progress.String() = %q", s)
	}
}

func TestDecodeErrors(t *testing.T) {
	valid, err := Encode(sampleDoc())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data string
		want error
	}{
		{"unknown field", string(valid) + "surprise: 1\n", ErrInvalidDocument},
		{"unknown nested field", strings.Replace(string(valid), "  identity: flotilla-agent-0\n", "  identity: flotilla-agent-0\n  shoeSize: 44\n", 1), ErrInvalidDocument},
		{"wrong type", strings.Replace(string(valid), "readyNodes: 3", "readyNodes: three", 1), ErrInvalidDocument},
		{"newer version", strings.Replace(string(valid), "flotilla.dev/v1alpha1", "flotilla.dev/v1beta1", 1), ErrUnsupportedVersion},
		{"other kind", strings.Replace(string(valid), "kind: ClusterStatus", "kind: Slice", 1), ErrUnsupportedVersion},
		{"no header", "cluster: x\n", ErrUnsupportedVersion},
		{"no cluster", "apiVersion: flotilla.dev/v1alpha1\nkind: ClusterStatus\nheartbeat: null\n", ErrInvalidDocument},
		{"not yaml", "apiVersion: [\n", ErrInvalidDocument},
		{"too large", "apiVersion: flotilla.dev/v1alpha1\n#" + strings.Repeat("x", MaxDocumentSize), ErrInvalidDocument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.data))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode: %v, want %v", err, tt.want)
			}
		})
	}
}

func TestEncodeRejectsNoCluster(t *testing.T) {
	if _, err := Encode(&ClusterStatus{}); !errors.Is(err, ErrInvalidDocument) {
		t.Fatalf("Encode without cluster: %v", err)
	}
	if _, err := Encode(nil); !errors.Is(err, ErrInvalidDocument) {
		t.Fatalf("Encode(nil): %v", err)
	}
}

func TestRevisionHash(t *testing.T) {
	for in, want := range map[string]string{
		"main@sha1:abc": "abc",
		"sha1:abc":      "abc",
		"abc":           "abc",
		"":              "",
		"main@abc":      "abc",
	} {
		if got := RevisionHash(in); got != want {
			t.Errorf("RevisionHash(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	valid, err := Encode(sampleDoc())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte("apiVersion: flotilla.dev/v1alpha1\nkind: ClusterStatus\ncluster: a\nunits: [{name: x, objects: 1}]\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("apiVersion: flotilla.dev/v1alpha1\nkind: ClusterStatus\ncluster: a\nheartbeat: 2026-01-01T00:00:00Z\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Decode(data)
		if err != nil {
			return
		}
		// What decodes must encode, and decode again to the same thing.
		out, err := Encode(doc)
		if err != nil {
			t.Fatalf("decoded document does not encode: %v", err)
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("re-encoded document does not decode: %v\n%s", err, out)
		}
		if !equality.Semantic.DeepEqual(Normalized(doc), again) {
			t.Fatalf("round trip differs\n%s", out)
		}
	})
}

// TestReadinessVersion: a unit's readiness fields make the document
// v1alpha4; under an older apiVersion they are refused by name.
func TestReadinessVersion(t *testing.T) {
	doc := sampleDoc()
	since := metav1.NewTime(t0)
	doc.Units[0].ReadyHash, doc.Units[0].ReadySince, doc.Units[0].ReadyHashes = doc.Units[0].Hash, &since, []string{doc.Units[0].Hash, "sha256:old"}
	doc.Progress = &Progress{Phase: PhaseUnits, Started: metav1.NewTime(t0)}
	data, err := Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "apiVersion: "+APIVersionV1Alpha4+"\n") {
		t.Fatalf("a document with readiness is not %s:\n%s", APIVersionV1Alpha4, data)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, Normalized(doc)) {
		t.Errorf("round trip changed the document\n got: %+v\nwant: %+v", got.Units, doc.Units)
	}
	for _, v := range []string{APIVersion, APIVersionV1Alpha3} {
		old := strings.Replace(string(data), APIVersionV1Alpha4, v, 1)
		if _, err := Decode([]byte(old)); !errors.Is(err, ErrInvalidDocument) || !strings.Contains(err.Error(), "readySince") {
			t.Errorf("readiness under %s: %v, want ErrInvalidDocument naming it", v, err)
		}
	}
}
