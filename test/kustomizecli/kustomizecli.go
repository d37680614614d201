package kustomizecli

import (
	"bytes"
	"context"
	"os/exec"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// Require fails t when bin/kustomize is missing, or skips it under -short
// (unit tests in `make test-unit` run without tools).
func Require(t testing.TB) {
	t.Helper()
	testenv.RequireTool(t, "kustomize")
}

// Build runs `kustomize build --load-restrictor LoadRestrictionsNone dir`
// (a fleet repo's units reference sources elsewhere in the repo, which
// Flotilla confines to the repo instead) and returns its objects in
// kustomize's order.
func Build(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	bin := testenv.RequireTool(t, "kustomize")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "build", "--load-restrictor", "LoadRestrictionsNone", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr.String())
	}
	return Objects(t, stdout.Bytes())
}

// Objects parses a stream of YAML documents as `kustomize build` prints
// them (and render.Result.YAML writes them) into objects, in order.
func Objects(t testing.TB, stream []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range bytes.Split(stream, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &o.Object); err != nil {
			t.Fatalf("YAML document %q…: %v", firstLine(doc), err)
		}
		objs = append(objs, o)
	}
	return objs
}

func firstLine(doc []byte) []byte {
	line, _, _ := bytes.Cut(bytes.TrimSpace(doc), []byte("\n"))
	return line
}
