package testenv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// KeepRunningAnnotation on a pod (or a Job's pod template) keeps kwok from
// completing it. kwok's pod-fast stages turn every Running pod owned by a
// Job — batch/v1 or Volcano's — into Succeeded at once, which is what tests
// of job completion want; tests that need to observe a job Running set this
// annotation (any value).
const KeepRunningAnnotation = "testenv.flotilla.dev/keep-running"

// podCompleteStage is the kwok stage that completes Job-owned pods.
const podCompleteStage = "pod-complete"

// withKeepRunning returns the stage files to give kwok, with the
// pod-complete stage replaced by a copy that skips pods carrying
// KeepRunningAnnotation.
func (c *Cluster) withKeepRunning(stages []string) ([]string, error) {
	dir := filepath.Join(c.Dir, "kwok-stages")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("kwok stages dir: %w", err)
	}
	out := make([]string, 0, len(stages))
	for _, path := range stages {
		patched, changed, err := patchPodCompleteStage(path)
		if err != nil {
			return nil, err
		}
		if !changed {
			out = append(out, path)
			continue
		}
		dst := filepath.Join(dir, filepath.Base(path))
		if err := os.WriteFile(dst, patched, 0o600); err != nil {
			return nil, fmt.Errorf("write kwok stage: %w", err)
		}
		out = append(out, dst)
	}
	return out, nil
}

// patchPodCompleteStage adds the keep-running exclusion to the pod-complete
// Stage if path holds it; other files are reported unchanged.
func patchPodCompleteStage(path string) ([]byte, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("open kwok stage: %w", err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 64<<10)
	var (
		docs    []string
		changed bool
	)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, false, fmt.Errorf("decode kwok stage %s: %w", path, err)
		}
		if doc == nil {
			continue
		}
		if isPodCompleteStage(doc) {
			if err := addKeepRunningExpression(doc); err != nil {
				return nil, false, fmt.Errorf("kwok stage %s: %w", path, err)
			}
			changed = true
		}
		b, err := yaml.Marshal(doc)
		if err != nil {
			return nil, false, fmt.Errorf("encode kwok stage %s: %w", path, err)
		}
		docs = append(docs, string(b))
	}
	return []byte(strings.Join(docs, "---\n")), changed, nil
}

func isPodCompleteStage(doc map[string]any) bool {
	meta, _ := doc["metadata"].(map[string]any)
	return doc["kind"] == "Stage" && meta != nil && meta["name"] == podCompleteStage
}

func addKeepRunningExpression(doc map[string]any) error {
	spec, _ := doc["spec"].(map[string]any)
	if spec == nil {
		return errors.New("stage without spec")
	}
	selector, _ := spec["selector"].(map[string]any)
	if selector == nil {
		selector = map[string]any{}
		spec["selector"] = selector
	}
	exprs, _ := selector["matchExpressions"].([]any)
	selector["matchExpressions"] = append(exprs, map[string]any{
		"key":      fmt.Sprintf(".metadata.annotations[%q]", KeepRunningAnnotation),
		"operator": "DoesNotExist",
	})
	return nil
}
