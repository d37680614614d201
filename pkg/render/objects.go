package render

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/kustomize/api/resmap"
)

// toObjects converts krusty's output, checking every object and the limits.
func toObjects(m resmap.ResMap, lim Limits) ([]*unstructured.Unstructured, int64, error) {
	if m.Size() > lim.MaxObjects {
		return nil, 0, classed(ErrTooLarge, fmt.Sprintf("%d objects, the limit is %d", m.Size(), lim.MaxObjects))
	}
	objs := make([]*unstructured.Unstructured, 0, m.Size())
	var size int64
	for i, r := range m.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, 0, classed(ErrInvalidObject, fmt.Sprintf("object %d (%s): %v", i+1, r.CurId(), err))
		}
		size += int64(len(b))
		if size > lim.MaxTotalSize {
			return nil, 0, classed(ErrTooLarge, fmt.Sprintf("rendered objects exceed %d bytes", lim.MaxTotalSize))
		}
		var obj map[string]any
		// apimachinery's decoder keeps integers as int64, as unstructured needs.
		if err := utiljson.Unmarshal(b, &obj); err != nil {
			return nil, 0, classed(ErrInvalidObject, fmt.Sprintf("object %d (%s): %v", i+1, r.CurId(), err))
		}
		u := &unstructured.Unstructured{Object: obj}
		if msg := missingField(u); msg != "" {
			return nil, 0, classed(ErrInvalidObject, fmt.Sprintf("object %s %s/%s %s", u.GetKind(), u.GetNamespace(), u.GetName(), msg))
		}
		objs = append(objs, u)
	}
	sortObjects(objs)
	for i := 1; i < len(objs); i++ {
		if objectKey(objs[i-1]) == objectKey(objs[i]) {
			return nil, 0, classed(ErrInvalidObject, "duplicate object "+objectKey(objs[i]))
		}
	}
	return objs, size, nil
}

func missingField(u *unstructured.Unstructured) string {
	switch {
	case u.GetAPIVersion() == "":
		return "has no apiVersion"
	case u.GetKind() == "":
		return "has no kind"
	case u.GetName() == "" && u.GetGenerateName() != "":
		return "has generateName " + u.GetGenerateName() + " but no metadata.name" + generateNameHint
	case u.GetName() == "":
		return "has no metadata.name"
	}
	return ""
}

// generateNameHint says why a generated name cannot do: objects are
// server-side applied, found again and pruned by name.
const generateNameHint = ": every object needs a fixed name (Flotilla applies, tracks and prunes objects by name); set metadata.name"

func objectKey(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	return gvk.Group + "/" + gvk.Kind + " " + u.GetNamespace() + "/" + u.GetName()
}

// applyOrder ranks kinds that others depend on first and admission webhooks
// last (the order kustomize and Helm use for installs); other kinds sit in
// between, alphabetically.
var applyOrder = func() map[string]int {
	first := []string{
		"Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition",
		"ServiceAccount", "PodSecurityPolicy", "Role", "ClusterRole", "RoleBinding",
		"ClusterRoleBinding", "ConfigMap", "Secret", "Endpoints", "Service",
		"LimitRange", "PriorityClass", "PersistentVolume", "PersistentVolumeClaim",
		"Deployment", "StatefulSet", "CronJob", "PodDisruptionBudget",
	}
	last := []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
	m := map[string]int{}
	for i, k := range first {
		m[k] = i - len(first)
	}
	for i, k := range last {
		m[k] = i + 1
	}
	return m
}()

// sortObjects orders objects deterministically, independent of input order:
// by applyOrder rank, then group, kind, namespace and name.
func sortObjects(objs []*unstructured.Unstructured) {
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		ga, gb := a.GroupVersionKind(), b.GroupVersionKind()
		if c := applyOrder[ga.Kind] - applyOrder[gb.Kind]; c != 0 {
			return c
		}
		for _, c := range []int{
			strings.Compare(ga.Kind, gb.Kind),
			strings.Compare(ga.Group, gb.Group),
			strings.Compare(a.GetNamespace(), b.GetNamespace()),
			strings.Compare(a.GetName(), b.GetName()),
			strings.Compare(ga.Version, gb.Version),
		} {
			if c != 0 {
				return c
			}
		}
		return 0
	})
}

var (
	docSepRe = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)
	sourceRe = regexp.MustCompile(`(?m)^# Source: (.+)$`)
)

// diagnose re-reads the resource files of a failed build to name the file
// and the object at fault, since krusty's messages do not always say which
// object of which file it rejected. It returns nil when it finds nothing.
func diagnose(f *confinedFS, files []string) error {
	for _, file := range files {
		data, err := f.readRel(file)
		if err != nil {
			continue
		}
		// Duplicates are only certain within one file: across files a
		// namespace or name transformer may still tell them apart.
		if err := checkDocuments(file, data, map[string]string{}); err != nil {
			return err
		}
	}
	return nil
}

// checkDocuments checks every document of a manifest file: a mapping with
// apiVersion, kind and metadata.name (List items likewise), unique by
// group/kind/namespace/name among the documents checked with the same seen
// map. Documents carrying Helm's "# Source:" comment are named after the
// template that produced them.
func checkDocuments(file string, data []byte, seen map[string]string) error {
	n := 0
	for _, chunk := range docSepRe.Split(string(data), -1) {
		where := file
		if m := sourceRe.FindStringSubmatch(chunk); m != nil {
			where = strings.TrimSpace(m[1])
		}
		dec := yaml.NewDecoder(strings.NewReader(chunk))
		for {
			var doc map[string]any
			err := dec.Decode(&doc)
			if err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				n++
				return errFile(where, ErrInvalidObject, fmt.Sprintf("object %d is not a YAML mapping: %v", n, err))
			}
			if doc == nil {
				continue // empty document
			}
			n++
			items := []map[string]any{doc}
			if k, _ := doc["kind"].(string); strings.HasSuffix(k, "List") {
				if list, ok := doc["items"].([]any); ok {
					items = items[:0]
					for _, it := range list {
						m, ok := it.(map[string]any)
						if !ok {
							return errFile(where, ErrInvalidObject, fmt.Sprintf("object %d has an item that is not a mapping", n))
						}
						items = append(items, m)
					}
				}
			}
			for _, it := range items {
				apiVersion, _ := it["apiVersion"].(string)
				kind, _ := it["kind"].(string)
				meta, _ := it["metadata"].(map[string]any)
				name, _ := meta["name"].(string)
				ns, _ := meta["namespace"].(string)
				switch {
				case kind == "":
					return errFile(where, ErrInvalidObject, fmt.Sprintf("object %d has no kind", n))
				case apiVersion == "":
					return errFile(where, ErrInvalidObject, fmt.Sprintf("object %d (%s) has no apiVersion", n, kind))
				case name == "":
					if gen, _ := meta["generateName"].(string); gen != "" {
						return errFile(where, ErrInvalidObject, fmt.Sprintf("object %d (%s generateName %s) has generateName but no metadata.name%s", n, kind, gen, generateNameHint))
					}
					return errFile(where, ErrInvalidObject, fmt.Sprintf("object %d (%s) has no metadata.name", n, kind))
				}
				group, _, _ := strings.Cut(apiVersion, "/")
				if !strings.Contains(apiVersion, "/") {
					group = ""
				}
				key := group + "/" + kind + " " + ns + "/" + name
				if prev, dup := seen[key]; dup {
					return errFile(where, ErrInvalidObject, fmt.Sprintf("object %d (%s %s) duplicates one in %s", n, kind, name, prev))
				}
				seen[key] = where
			}
		}
	}
	return nil
}
