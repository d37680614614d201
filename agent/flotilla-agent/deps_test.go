package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/flotilla-gitops/flotilla/"

// agentSide are the only packages of this module the in-cluster agent may
// link (a path, or a prefix ending in "/"): its own, and the libraries both
// sides share. A new package is hub-only until it is added here; every
// package linked into the agent is charged by image scanners to every
// agent in every cluster.
var agentSide = []string{
	module + "agent/",                 // the agent's own code: loop, apply, Volcano, trust, status writer
	module + "pkg/gitrepo",            // the only importer of go-git
	module + "pkg/gitrepo/signature",  // signing status, verifying commits
	module + "pkg/health",             // CEL health checks (Flux's runtime/cel), judged on the cluster
	module + "pkg/placement",          // gang arithmetic, shared with the hub's placement
	module + "pkg/plural",             // messages
	module + "pkg/redact",             // credentials out of logs and status
	module + "pkg/render",             // one unit, as the hub renders it
	module + "pkg/render/sopsdecrypt", // age-only SOPS decryption
	module + "pkg/slice",              // the Git contract: what the hub cut for this cluster
	module + "pkg/status",             // the Git contract: what the agent reports
	module + "pkg/version",
}

// hubOnlyThirdParty are outside packages the agent must not link: chart
// downloading, and the admission stack that only the hub's policy
// compiler uses (the agent links cel-go alone, for health checks).
var hubOnlyThirdParty = []string{
	"helm.sh/helm/v3/pkg/action",
	"helm.sh/helm/v3/pkg/downloader",
	"helm.sh/helm/v3/pkg/getter",
	"helm.sh/helm/v3/pkg/registry",
	"helm.sh/helm/v3/pkg/repo",
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

// TestAgentLinksNoHubCode: of this module the agent links only agentSide
// (its own code under agent/, the Git contract, rendering and Git), and
// none of the hub's outside dependencies or sops' cloud key services.
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
		if strings.HasPrefix(dep, module) && !allowed(dep) {
			t.Errorf("the agent links %s, which is not on the agent's side (agentSide)", dep)
		}
		for _, bad := range hubOnlyThirdParty {
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

// allowed: dep is on the agent's side: an agentSide path, or below one
// that ends in "/".
func allowed(dep string) bool {
	return slices.ContainsFunc(agentSide, func(p string) bool {
		return dep == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(dep, p))
	})
}

// matchesImport: dep is the path bad (trailing "/" dropped) or below it.
func matchesImport(dep, bad string) bool {
	bad = strings.TrimSuffix(bad, "/")
	return dep == bad || strings.HasPrefix(dep, bad+"/")
}
