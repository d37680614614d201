package render

import (
	"encoding/base64"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/hasher"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/render/sopsdecrypt"
)

// ClusterHash stands, in a render without a Decryptor, for the name-hash
// suffix kustomize gives a generated Secret or ConfigMap whose data comes
// from SOPS-encrypted files: kustomize hashes the data, and only the
// agent holding the key has the plaintext the cluster's name is the hash
// of. The hub's own hash (of the redacted markers) names no object on any
// cluster, so it is never shown.
const ClusterHash = "<hash decided on the cluster>"

// markClusterHashes renames, in a render without plaintext, every
// generated Secret and ConfigMap whose name ends in kustomize's hash of
// redacted SOPS data to "<name>-" + ClusterHash, and every string equal
// to its old name (the references kustomize pointed at it) with it. A
// name counts as generated when kustomize's own hasher, run on the
// object, gives its suffix; its data depends on encrypted inputs when a
// value holds a redaction marker. It reports whether anything changed.
func markClusterHashes(objs []*unstructured.Unstructured) bool {
	renamed := map[string]string{}
	for _, o := range objs {
		if old := o.GetName(); o.GroupVersionKind().Group == "" && redactedData(o) {
			if base, ok := kustomizeHashed(o); ok {
				renamed[old] = base + "-" + ClusterHash
			}
		}
	}
	if len(renamed) == 0 {
		return false
	}
	for _, o := range objs {
		o.Object = replaceStrings(o.Object, renamed).(map[string]any)
	}
	return true
}

// redactedData: a Secret or ConfigMap with a redaction marker in a value.
func redactedData(o *unstructured.Unstructured) bool {
	var fields []string
	switch o.GetKind() {
	case "Secret":
		fields = []string{"data", "stringData"}
	case "ConfigMap":
		fields = []string{"data", "binaryData"}
	default:
		return false
	}
	for _, field := range fields {
		m, _, _ := unstructured.NestedMap(o.Object, field)
		for _, v := range m {
			s, _ := v.(string)
			if field != "stringData" && (o.GetKind() == "Secret" || field == "binaryData") {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					continue
				}
				s = string(b)
			}
			if strings.Contains(s, sopsdecrypt.RedactedPrefix) {
				return true
			}
		}
	}
	return false
}

// kustomizeHashed returns the name o had before kustomize appended its
// hash, when it did.
func kustomizeHashed(o *unstructured.Unstructured) (string, bool) {
	name := o.GetName()
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "", false
	}
	c := o.DeepCopy()
	c.SetName(name[:i])
	node, err := kyaml.FromMap(c.Object)
	if err != nil {
		return "", false
	}
	h, err := new(hasher.Hasher).Hash(node)
	if err != nil || h != name[i+1:] {
		return "", false
	}
	return name[:i], true
}

// replaceStrings returns v with every string that is a key of renamed
// replaced by its value.
func replaceStrings(v any, renamed map[string]string) any {
	switch t := v.(type) {
	case string:
		if n, ok := renamed[t]; ok {
			return n
		}
	case map[string]any:
		for k, e := range t {
			t[k] = replaceStrings(e, renamed)
		}
	case []any:
		for i, e := range t {
			t[i] = replaceStrings(e, renamed)
		}
	}
	return v
}
