package plan

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/render/sopsdecrypt"
)

// Generated noise dropped before diffing: fields the API server writes,
// not the fleet repo. Labels and annotations (helm.sh/chart included) are
// kept: a chart version bump is a real change.
var (
	droppedMetadata = []string{"managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink"}
	// last-applied-configuration duplicates the object (Secret data too).
	droppedAnnotations = []string{"kubectl.kubernetes.io/last-applied-configuration"}
)

// masker replaces Secret values with a keyed hash. The key is random per
// plan unless set, so equal values within one plan get equal markers (a
// change shows as a change) while a marker cannot be brute-forced offline
// or compared with another plan's.
type masker struct{ key []byte }

func newMasker(key []byte) *masker {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key) // never fails (crypto/rand panics instead)
	}
	return &masker{key: key}
}

func (m *masker) marker(value string) string {
	h := hmac.New(sha256.New, m.key)
	h.Write([]byte(value))
	return "<masked: sha256:" + hex.EncodeToString(h.Sum(nil))[:12] + ">"
}

// secretValue is how a Secret value shows in a plan: a value that was
// SOPS-encrypted in Git (the hub renders it as sopsdecrypt's marker of its
// ciphertext, in data base64-encoded when a secretGenerator made it) shows
// as that marker, so the reader sees it is encrypted and whether its
// ciphertext changed; any other value is masked.
func (m *masker) secretValue(field, v string) string {
	s := v
	if field == "data" {
		if b, err := base64.StdEncoding.DecodeString(v); err == nil {
			s = string(b)
		}
	}
	if strings.HasPrefix(s, sopsdecrypt.RedactedPrefix) && len(s) == len(sopsdecrypt.RedactedPrefix)+16 {
		return "<" + s + ">"
	}
	return m.marker(v)
}

// isSecret reports whether o is a core Secret.
func isSecret(o *unstructured.Unstructured) bool {
	return o.GetKind() == "Secret" && o.GetAPIVersion() == "v1"
}

// normalize returns a copy of o without generated noise and with Secret
// values masked. o is not modified.
func (m *masker) normalize(o *unstructured.Unstructured) *unstructured.Unstructured {
	c := o.DeepCopy()
	delete(c.Object, "status")
	if meta, ok := c.Object["metadata"].(map[string]any); ok {
		for _, f := range droppedMetadata {
			delete(meta, f)
		}
		if ann, ok := meta["annotations"].(map[string]any); ok {
			for _, a := range droppedAnnotations {
				delete(ann, a)
			}
			if len(ann) == 0 {
				delete(meta, "annotations")
			}
		}
		if l, ok := meta["labels"].(map[string]any); ok && len(l) == 0 {
			delete(meta, "labels")
		}
	}
	if isSecret(c) {
		for _, field := range []string{"data", "stringData"} {
			vals, ok := c.Object[field].(map[string]any)
			if !ok {
				if _, present := c.Object[field]; present {
					// Not a map: mask the whole field rather than print it.
					c.Object[field] = m.marker(toYAML(c.Object[field]))
				}
				continue
			}
			for k, v := range vals {
				s, ok := v.(string)
				if !ok {
					s = toYAML(v)
				}
				vals[k] = m.secretValue(field, s)
			}
		}
	}
	return c
}

func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// objectKey identifies an object across versions of its API group.
func objectKey(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	return gvk.Group + "/" + gvk.Kind + " " + o.GetNamespace() + "/" + o.GetName()
}

// diffObjects compares a unit's objects, both already normalized. The
// result lists head's objects in head's order, then removed ones in base's.
func diffObjects(base, head []*unstructured.Unstructured) ([]ObjectPlan, error) {
	baseByKey := make(map[string]*unstructured.Unstructured, len(base))
	for _, o := range base {
		baseByKey[objectKey(o)] = o
	}
	var out []ObjectPlan
	seen := make(map[string]bool, len(head))
	for _, h := range head {
		k := objectKey(h)
		seen[k] = true
		hy, err := yaml.Marshal(h.Object)
		if err != nil {
			return nil, err
		}
		b, ok := baseByKey[k]
		if !ok {
			out = append(out, objectPlan(h, Added, wholeText(opInsert, string(hy)), h))
			continue
		}
		by, err := yaml.Marshal(b.Object)
		if err != nil {
			return nil, err
		}
		if d := unifiedDiff(string(by), string(hy)); d != "" {
			out = append(out, objectPlan(h, Changed, d, h))
		}
	}
	for _, b := range base {
		if seen[objectKey(b)] {
			continue
		}
		by, err := yaml.Marshal(b.Object)
		if err != nil {
			return nil, err
		}
		out = append(out, objectPlan(b, Removed, wholeText(opDelete, string(by)), nil))
	}
	return out, nil
}

func objectPlan(o *unstructured.Unstructured, ch Change, diff string, after *unstructured.Unstructured) ObjectPlan {
	return ObjectPlan{
		APIVersion: o.GetAPIVersion(),
		Kind:       o.GetKind(),
		Namespace:  o.GetNamespace(),
		Name:       o.GetName(),
		Change:     ch,
		Diff:       diff,
		After:      after,
	}
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
