package main

import (
	"os/exec"
	"strings"
	"testing"
)

// hubOnly are import paths (a path or a path prefix ending in "/") that the
// in-cluster agent must not link: the hub's fleet model, compiler and
// fleet views, chart downloading, and the admission/CEL stack that only
// the hub's policy compiler uses. Every package linked into the agent is
// charged by image scanners to every agent in every cluster.
var hubOnly = []string{
	"github.com/flotilla-gitops/flotilla/hub/",
	"github.com/flotilla-gitops/flotilla/pkg/fleet",
	"github.com/flotilla-gitops/flotilla/pkg/compile",
	"github.com/flotilla-gitops/flotilla/pkg/fleetstatus",
	"github.com/flotilla-gitops/flotilla/pkg/plan",
	"github.com/flotilla-gitops/flotilla/pkg/bootstrap",
	"github.com/flotilla-gitops/flotilla/pkg/admission",
	"github.com/flotilla-gitops/flotilla/pkg/traffic",
	"github.com/flotilla-gitops/flotilla/pkg/identity",
	"github.com/flotilla-gitops/flotilla/pkg/kuratorimport",
	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor",
	"helm.sh/helm/v3/pkg/action",
	"helm.sh/helm/v3/pkg/downloader",
	"helm.sh/helm/v3/pkg/getter",
	"helm.sh/helm/v3/pkg/registry",
	"helm.sh/helm/v3/pkg/repo",
	"github.com/google/cel-go/",
	"github.com/antlr4-go/",
	"k8s.io/apiserver/",
}

// cloudKMS are the cloud SDKs sops' key services pull in. The agent
// decrypts SOPS documents with age only (pkg/render/sopsdecrypt imports
// sops' age key source, never its tree, stores, decrypt or keyservice
// packages, which import all of these).
var cloudKMS = []string{
	"github.com/aws/aws-sdk-go",
	"github.com/aws/aws-sdk-go-v2/",
	"cloud.google.com/go/",
	"google.golang.org/api/",
	"github.com/Azure/azure-sdk-for-go/",
	"github.com/hashicorp/vault/",
	"github.com/getsops/sops/v3/keyservice",
	"github.com/getsops/sops/v3/kms",
	"github.com/getsops/sops/v3/gcpkms",
	"github.com/getsops/sops/v3/azkv",
	"github.com/getsops/sops/v3/hcvault",
}

// TestAgentLinksNoHubCode: the agent's dependency graph holds only the
// slice contract, rendering, apply, Git and its status writer.
func TestAgentLinksNoHubCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps printed %d packages; is this the agent?", len(deps))
	}
	sops := false
	for _, dep := range deps {
		for _, bad := range hubOnly {
			if matchesImport(dep, bad) {
				t.Errorf("the agent links %s (hub-only: %s)", dep, bad)
			}
		}
		for _, bad := range cloudKMS {
			if matchesImport(dep, bad) {
				t.Errorf("the agent links %s (a cloud KMS SDK: %s)", dep, bad)
			}
		}
		sops = sops || dep == "github.com/getsops/sops/v3/age"
	}
	if !sops {
		t.Error("the agent does not link sops' age key source: does it still decrypt SOPS files?")
	}
	t.Logf("the agent links %d packages", len(deps))
}

// matchesImport: dep is the path bad (trailing "/" dropped) or below it,
// or starts with bad when bad ends in "/".
func matchesImport(dep, bad string) bool {
	return dep == strings.TrimSuffix(bad, "/") || strings.HasPrefix(dep, bad) || strings.HasPrefix(dep, bad+"/")
}
