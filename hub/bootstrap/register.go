package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// Cluster is what Register records about a cluster.
type Cluster struct {
	Name   string
	Labels map[string]string
	// AgeRecipient, when set, is written as spec.sops.ageRecipient (the
	// public half of the cluster's SOPS key).
	AgeRecipient string
}

// RegisterOptions configure Register.
type RegisterOptions struct {
	// Force updates an already registered cluster: the given labels (and
	// age recipient) are set in its file, everything else in it (other
	// labels, spec, comments) is kept.
	Force bool
}

// RegisterResult says what Register did.
type RegisterResult struct {
	// File is the cluster's file, slash-separated, relative to the repo.
	File string
	// Created is false when an existing file was updated.
	Created bool
	// Problems are errors in other files of the repo, there before and
	// left alone; they stop `flotilla render` until fixed.
	Problems fleet.ErrorList
}

// Register writes the cluster into the fleet repo at repoDir as
// clusters/<name>.yaml, or updates its existing file (wherever it is under
// clusters/) when opts.Force is set; without it an existing cluster is
// ErrClusterExists. The repo is then loaded by hub/fleet: when the
// cluster's file does not validate, it is restored (or removed) and the
// fleet.ErrorList is returned.
func Register(ctx context.Context, repoDir string, c Cluster, opts RegisterOptions) (RegisterResult, error) {
	if errs := validation.IsDNS1123Label(c.Name); len(errs) > 0 {
		return RegisterResult{}, fmt.Errorf("%w: cluster name %q: %s", ErrInvalidOption, c.Name, strings.Join(errs, "; "))
	}
	repo, _, err := loadFleet(ctx, repoDir)
	if err != nil {
		return RegisterResult{}, err
	}
	rel, old, err := existingClusterFile(repoDir, repo, c.Name)
	if err != nil {
		return RegisterResult{}, err
	}
	res := RegisterResult{File: rel, Created: old == nil}
	var content []byte
	if old == nil {
		content, err = newClusterDocument(c)
	} else {
		if !opts.Force {
			return RegisterResult{}, fmt.Errorf("%s: %w in %s (use --force to update its labels)", c.Name, ErrClusterExists, rel)
		}
		content, err = updateCluster(old, c)
		if err != nil {
			return RegisterResult{}, fmt.Errorf("update %s: %w", rel, err)
		}
	}
	if err != nil {
		return RegisterResult{}, err
	}
	full := filepath.Join(repoDir, filepath.FromSlash(rel))
	if err := writeFileAtomic(full, content); err != nil {
		return RegisterResult{}, fmt.Errorf("register %s: %w", c.Name, err)
	}
	_, after, err := loadFleet(ctx, repoDir)
	if err == nil {
		var mine fleet.ErrorList
		for _, e := range after {
			if e.File == rel {
				mine = append(mine, e)
			} else {
				res.Problems = append(res.Problems, e)
			}
		}
		if len(mine) > 0 {
			err = mine
		}
	}
	if err != nil {
		if rerr := restore(full, old); rerr != nil {
			err = errors.Join(err, fmt.Errorf("restore %s: %w", rel, rerr))
		}
		return RegisterResult{}, fmt.Errorf("register %s: %w", c.Name, err)
	}
	return res, nil
}

// loadFleet loads the repo, separating its input problems (returned, the
// Repo still usable for lookups) from failures to read it at all.
func loadFleet(ctx context.Context, repoDir string) (*fleet.Repo, fleet.ErrorList, error) {
	repo, err := fleet.Load(ctx, repoDir)
	var list fleet.ErrorList
	if err != nil && !errors.As(err, &list) {
		return nil, nil, err
	}
	return repo, list, nil
}

// existingClusterFile finds the cluster's file: the one hub/fleet loaded it
// from, or clusters/<name>.yaml|.yml even if it did not load. old is nil
// when there is none; rel is then where the new file goes.
func existingClusterFile(repoDir string, repo *fleet.Repo, name string) (rel string, old []byte, err error) {
	newFile := path.Join(fleet.ClustersDir, name+".yaml")
	candidates := []string{newFile, path.Join(fleet.ClustersDir, name+".yml")}
	if repo != nil {
		if c := repo.Cluster(name); c != nil && c.Source.File != "" {
			candidates = slices.Insert(candidates, 0, c.Source.File)
		}
	}
	for _, rel := range candidates {
		data, err := os.ReadFile(filepath.Join(repoDir, filepath.FromSlash(rel)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("read %s: %w", rel, err)
		}
		return rel, data, nil
	}
	return newFile, nil, nil
}

func restore(full string, old []byte) error {
	if old == nil {
		return os.Remove(full)
	}
	return writeFileAtomic(full, old)
}

// newClusterDocument is a new clusters/<name>.yaml holding only what was
// said, keys in the conventional order.
func newClusterDocument(c Cluster) ([]byte, error) {
	meta := &yaml.Node{Kind: yaml.MappingNode}
	setScalar(meta, "name", c.Name)
	if len(c.Labels) > 0 {
		ls := mappingChild(meta, "labels")
		for _, k := range sortedKeys(c.Labels) {
			setScalar(ls, k, c.Labels[k])
		}
	}
	root := &yaml.Node{Kind: yaml.MappingNode}
	setScalar(root, "apiVersion", fleet.APIVersion)
	setScalar(root, "kind", fleet.KindCluster)
	root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "metadata"}, meta)
	if c.AgeRecipient != "" {
		setScalar(mappingChild(mappingChild(root, "spec"), "sops"), "ageRecipient", c.AgeRecipient)
	}
	root.HeadComment = "Registered by `flotilla bootstrap`. Labels select the cluster into fleets\n" +
		"and syncPolicies; an optional spec gives hints (kubernetesVersion, capacity,\n" +
		"statusKeys)."
	return encodeYAML(root)
}

func encodeYAML(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// updateCluster sets c's labels (and age recipient, when set) in a cluster
// document, keeping everything else (comments included) as it was.
func updateCluster(data []byte, c Cluster) ([]byte, error) {
	labels := c.Labels
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not valid YAML (fix or delete the file): %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("not a YAML mapping (fix or delete the file)")
	}
	if len(labels) == 0 && c.AgeRecipient == "" {
		return data, nil
	}
	if len(labels) > 0 {
		meta := mappingChild(doc.Content[0], "metadata")
		ls := mappingChild(meta, "labels")
		for _, k := range sortedKeys(labels) {
			setScalar(ls, k, labels[k])
		}
	}
	if c.AgeRecipient != "" {
		setScalar(mappingChild(mappingChild(doc.Content[0], "spec"), "sops"), "ageRecipient", c.AgeRecipient)
	}
	return encodeYAML(&doc)
}

// mappingChild returns m's mapping value under key, creating it (or
// replacing a null or scalar there) as needed.
func mappingChild(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			if v.Kind != yaml.MappingNode {
				*v = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			}
			return v
		}
	}
	v := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
	return v
}

func setScalar(m *yaml.Node, key, value string) {
	val := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			val.HeadComment, val.LineComment = m.Content[i+1].HeadComment, m.Content[i+1].LineComment
			m.Content[i+1] = val
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, val)
}
