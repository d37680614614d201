package fleetrender

import (
	"sort"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// kustomizationArgs are what an application unit's kustomization.yaml is
// generated from.
type kustomizationArgs struct {
	namespace string
	resources []string
	patches   []fleet.Patch
	images    map[string]fleet.Image
	replicas  map[string]int64
}

func (k *kustomizationArgs) marshal() ([]byte, error) {
	return marshalKustomization(k.namespace, k.resources, k.patches, k.images, k.replicas)
}

// marshalKustomization writes a unit's kustomization.yaml: the source as
// resources, then the destination's customisations in the order kustomize
// applies them (namespace, patches, images, replicas). Images and replicas
// are sorted by name.
func marshalKustomization(namespace string, resources []string, patches []fleet.Patch, images map[string]fleet.Image, replicas map[string]int64) ([]byte, error) {
	res := make([]any, len(resources))
	for i, r := range resources {
		res[i] = r
	}
	doc := orderedMap{
		{"apiVersion", "kustomize.config.k8s.io/v1beta1"},
		{"kind", "Kustomization"},
	}
	doc = doc.add("namespace", namespace)
	doc = append(doc, field{"resources", res})
	if len(patches) > 0 {
		list := make([]any, len(patches))
		for i, p := range patches {
			entry := orderedMap{{"patch", p.Patch}}
			if t := p.Target; t != nil {
				target := orderedMap{}.
					add("group", t.Group).
					add("version", t.Version).
					add("kind", t.Kind).
					add("name", t.Name).
					add("namespace", t.Namespace).
					add("labelSelector", t.LabelSelector).
					add("annotationSelector", t.AnnotationSelector)
				entry = append(entry, field{"target", target})
			}
			list[i] = entry
		}
		doc = append(doc, field{"patches", list})
	}
	if len(images) > 0 {
		list := make([]any, 0, len(images))
		for _, name := range sortedKeys(images) {
			im := images[name]
			list = append(list, orderedMap{{"name", im.Name}}.
				add("newName", im.NewName).
				add("newTag", im.NewTag).
				add("digest", im.Digest))
		}
		doc = append(doc, field{"images", list})
	}
	if len(replicas) > 0 {
		list := make([]any, 0, len(replicas))
		for _, name := range sortedKeys(replicas) {
			list = append(list, orderedMap{{"name", name}, {"count", replicas[name]}})
		}
		doc = append(doc, field{"replicas", list})
	}
	return marshalDocs(doc)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
