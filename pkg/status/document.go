package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// MaxDocumentSize bounds status.yaml: Decode refuses larger input, and the
// writer truncates messages (MaxMessageLength) so a real document stays far
// below it.
const MaxDocumentSize = 1 << 20

// Classified decoding errors; test with errors.Is.
var (
	// ErrInvalidDocument: not YAML, an unknown field, a wrong type, a
	// missing cluster name, or too large.
	ErrInvalidDocument = errors.New("invalid status document")
	// ErrUnsupportedVersion: apiVersion or kind is not one this build reads
	// (e.g. a newer agent's document).
	ErrUnsupportedVersion = errors.New("unsupported status document version")
)

// Encode returns the document as deterministic YAML: fields in the
// struct's order, map keys sorted, units, jobs, queues and conditions
// sorted by name (or type), times in RFC 3339 UTC. The same document always
// encodes to the same bytes, so an unchanged status is an unchanged blob.
// apiVersion is the oldest that carries the document (v1alpha1 without an
// instanceID, v1alpha2 with one, v1alpha3 with progress, v1alpha4 with a
// unit's readiness fields) and kind is set. doc is not modified.
func Encode(doc *ClusterStatus) ([]byte, error) {
	if doc == nil {
		return nil, fmt.Errorf("encode status: %w: nil document", ErrInvalidDocument)
	}
	d := Normalized(doc)
	if d.Cluster == "" {
		return nil, fmt.Errorf("encode status: %w: cluster is empty", ErrInvalidDocument)
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	// YAML is a superset of JSON: parsing the JSON with yaml.v3 keeps the
	// struct's field order, which sigs.k8s.io/yaml (sorted keys) would not.
	var node yaml.Node
	if err := yaml.Unmarshal(raw, &node); err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	blockStyle(&node)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&node); err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	return out.Bytes(), nil
}

// blockStyle turns JSON's flow style into block style. Scalars keep their
// tag, so the encoder still quotes a string that would read as another type.
func blockStyle(n *yaml.Node) {
	n.Style &^= yaml.FlowStyle | yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// Decode parses status.yaml strictly: the apiVersion must be v1alpha1 to
// v1alpha4 and the kind ClusterStatus (ErrUnsupportedVersion otherwise),
// and every field must be known to that version (ErrInvalidDocument; e.g.
// instanceID in a v1alpha1 document). It never panics on hostile input.
func Decode(data []byte) (*ClusterStatus, error) {
	if len(data) > MaxDocumentSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidDocument, len(data), MaxDocumentSize)
	}
	// One YAML parse: the JSON form then serves both the version check and
	// the strict decoding (the hub decodes a document per cluster).
	raw, err := sigsyaml.YAMLToJSONStrict(data) // strict: duplicate keys are an error
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidDocument, err)
	}
	var header struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &header); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidDocument, err)
	}
	if versionRank(header.APIVersion) == 0 || header.Kind != Kind {
		return nil, fmt.Errorf("%w: %s %s (this build reads %s, %s, %s or %s %s)", ErrUnsupportedVersion,
			orNone(header.APIVersion), orNone(header.Kind), APIVersion, APIVersionV1Alpha2, APIVersionV1Alpha3, APIVersionV1Alpha4, Kind)
	}
	var doc ClusterStatus
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidDocument, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one document", ErrInvalidDocument)
	}
	if doc.Cluster == "" {
		return nil, fmt.Errorf("%w: cluster is empty", ErrInvalidDocument)
	}
	if need := minVersion(&doc); versionRank(doc.APIVersion) < versionRank(need) {
		return nil, fmt.Errorf("%w: %s needs apiVersion %s", ErrInvalidDocument, versionFeature(&doc), need)
	}
	return &doc, nil
}

// versions in order: each adds fields to the one before.
var versions = []string{APIVersion, APIVersionV1Alpha2, APIVersionV1Alpha3, APIVersionV1Alpha4}

// versionRank is v's place in versions, from 1; 0 for one this build does
// not read.
func versionRank(v string) int {
	for i, known := range versions {
		if v == known {
			return i + 1
		}
	}
	return 0
}

// minVersion is the oldest apiVersion that carries doc.
func minVersion(doc *ClusterStatus) string {
	v := APIVersion
	if doc.InstanceID != "" {
		v = APIVersionV1Alpha2
	}
	if doc.Progress != nil {
		v = APIVersionV1Alpha3
	}
	for _, u := range doc.Units {
		if u.HasReadiness() {
			v = APIVersionV1Alpha4
		}
	}
	return v
}

// versionFeature names the field that needs minVersion(doc).
func versionFeature(doc *ClusterStatus) string {
	switch minVersion(doc) {
	case APIVersionV1Alpha4:
		return "a unit's readyHash, readySince or readyHashes"
	case APIVersionV1Alpha3:
		return "progress"
	}
	return "instanceID"
}

func orNone(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// Normalized returns a deep copy of doc with its identity set and its lists
// in a canonical order.
func Normalized(doc *ClusterStatus) *ClusterStatus {
	d := doc.DeepCopy()
	d.APIVersion, d.Kind = minVersion(d), Kind
	sortConditions(d.Conditions)
	sort.SliceStable(d.Units, func(i, j int) bool { return d.Units[i].Name < d.Units[j].Name })
	for i := range d.Units {
		sortConditions(d.Units[i].Conditions)
	}
	sort.SliceStable(d.Jobs, func(i, j int) bool {
		a, b := d.Jobs[i], d.Jobs[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	if d.Capacity != nil {
		sort.SliceStable(d.Capacity.Queues, func(i, j int) bool { return d.Capacity.Queues[i].Name < d.Capacity.Queues[j].Name })
	}
	sort.Strings(d.APIVersions)
	return d
}

func sortConditions(cs []metav1.Condition) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Type < cs[j].Type })
}

// DeepCopy returns an independent copy of the document.
func (in *ClusterStatus) DeepCopy() *ClusterStatus {
	if in == nil {
		return nil
	}
	out := *in
	out.APIVersions = append([]string(nil), in.APIVersions...)
	out.Conditions = copyConditions(in.Conditions)
	if in.Verification != nil {
		v := *in.Verification
		out.Verification = &v
	}
	if in.Units != nil {
		out.Units = make([]UnitStatus, len(in.Units))
		for i, u := range in.Units {
			u.Conditions = copyConditions(u.Conditions)
			if u.ReadySince != nil {
				t := *u.ReadySince
				u.ReadySince = &t
			}
			u.ReadyHashes = append([]string(nil), u.ReadyHashes...)
			out.Units[i] = u
		}
	}
	if in.Jobs != nil {
		out.Jobs = make([]JobStatus, len(in.Jobs))
		for i, j := range in.Jobs {
			if j.StartTime != nil {
				t := *j.StartTime
				j.StartTime = &t
			}
			if j.CompletionTime != nil {
				t := *j.CompletionTime
				j.CompletionTime = &t
			}
			out.Jobs[i] = j
		}
	}
	if in.Capacity != nil {
		c := *in.Capacity
		c.Allocatable = copyMap(c.Allocatable)
		c.Free = copyMap(c.Free)
		if c.Queues != nil {
			qs := make([]QueueCapacity, len(c.Queues))
			for i, q := range c.Queues {
				q.Capability = copyMap(q.Capability)
				q.Allocated = copyMap(q.Allocated)
				qs[i] = q
			}
			c.Queues = qs
		}
		out.Capacity = &c
	}
	if in.HeartbeatInterval != nil {
		d := *in.HeartbeatInterval
		out.HeartbeatInterval = &d
	}
	if in.Progress != nil {
		p := *in.Progress
		p.Units = append([]UnitProgress(nil), in.Progress.Units...)
		out.Progress = &p
	}
	return &out
}

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	return append([]metav1.Condition(nil), in...)
}

func copyMap(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// RevisionHash returns the commit hash of a revision string
// ("main@sha1:<hash>", "sha1:<hash>" or a bare hash); "" when there is none.
func RevisionHash(rev string) string {
	if i := strings.LastIndex(rev, ":"); i >= 0 {
		rev = rev[i+1:]
	}
	if i := strings.LastIndex(rev, "@"); i >= 0 {
		rev = rev[i+1:]
	}
	return rev
}
