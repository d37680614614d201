package render

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// fluxPlaceholderNamespace is what Flux's generator sets in a kustomization
// that lists nothing, because krusty refuses an empty kustomization.
const fluxPlaceholderNamespace = "_placeholder"

// generateKustomization writes into f's overlay the kustomization.yaml that
// Flux's kustomize-controller generates for a directory without one
// (fluxcd/pkg/kustomize, Generator.GenerateManifest), so that a source
// Flux deploys renders the same here. dir is repo-relative and
// symlink-free. The rules, Flux's:
//
//   - the tree is walked in lexical order without following symlinked
//     directories;
//   - a subdirectory holding a kustomization file is listed as one resource
//     and not descended into;
//   - a file whose name ends in exactly .yaml or .yml is listed, and must
//     parse as Kubernetes YAML (else the whole generation fails, as in
//     Flux); every other file is ignored;
//   - entries are "./"-prefixed paths relative to dir; with none, the
//     kustomization sets a placeholder namespace instead, and builds to
//     nothing.
//
// Every read goes through f, so confinement, size limits, the alias-bomb
// scan and SOPS handling apply to the scan as to the build.
func generateKustomization(f *confinedFS, dir string) error {
	var resources []string
	var scan func(rel string) error
	scan = func(rel string) error {
		if err := f.ctxErr(); err != nil {
			return err
		}
		names, err := f.readDirRel(rel)
		if err != nil {
			return f.note(err)
		}
		for _, name := range names {
			child := path.Join(rel, name)
			isDir, err := f.lstatIsDir(child)
			if err != nil {
				return f.note(err)
			}
			entry := "./" + strings.TrimPrefix(child, dir+"/")
			if isDir {
				if hasKustomization(f, child) {
					resources = append(resources, entry)
					continue
				}
				if err := scan(child); err != nil {
					return err
				}
				continue
			}
			if ext := path.Ext(name); ext != ".yaml" && ext != ".yml" {
				continue
			}
			data, err := f.readRel(child)
			if err != nil {
				return err
			}
			if err := parseKubernetesYAML(data); err != nil {
				return errFile(child, ErrKustomize, "not Kubernetes YAML, and the directory "+dir+" has no kustomization.yaml, so it is one of its resources (as in Flux): "+err.Error())
			}
			resources = append(resources, entry)
		}
		return nil
	}
	if err := scan(dir); err != nil {
		return err
	}
	k := types.Kustomization{TypeMeta: types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind}}
	if len(resources) == 0 {
		k.Namespace = fluxPlaceholderNamespace
	} else {
		k.Resources = resources
	}
	data, err := yaml.Marshal(k)
	if err != nil {
		return fmt.Errorf("generate kustomization for %s: %w", dir, err)
	}
	f.overlay[path.Join(dir, konfig.DefaultKustomizationFileName())] = data
	return nil
}

// lstatIsDir says whether rel (whose parent is symlink-free) is a directory
// itself, not a symlink to one: the walk does not follow symlinks, as
// filepath.Walk, which Flux's generator uses, does not.
func (f *confinedFS) lstatIsDir(rel string) (bool, error) {
	if _, ok := f.overlay[rel]; ok {
		return false, nil
	}
	fi, err := f.root.Lstat(rel)
	if err != nil {
		return false, relPathError(err, rel)
	}
	return fi.Mode()&fs.ModeType == fs.ModeDir, nil
}

// parseKubernetesYAML parses data as Flux's generator does, with krusty's
// resource factory, recovering from the panics its parser can raise.
func parseKubernetesYAML(data []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the YAML parser panicked: %v", r)
		}
	}()
	_, err = resourceFactory().SliceFromBytes(data)
	return err
}

func resourceFactory() *resource.Factory {
	return provider.NewDefaultDepProvider().GetResourceFactory()
}
