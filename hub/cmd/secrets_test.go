package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	yaml "gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/pkg/render/sopsdecrypt"
)

var ageSecretKeyRe = regexp.MustCompile(`AGE-SECRET-KEY-1[0-9A-Z]+`)

// bootstrapWithKey bootstraps cluster with a generated age key and returns
// the recipient written into its Cluster file, after checking that the
// install manifests (and only they) hold the matching private key.
func bootstrapWithKey(t *testing.T, dir, cluster string, extra ...string) string {
	t.Helper()
	args := append([]string{"bootstrap", cluster, "--repo", dir, "--repo-url", fleetURL, "--sops-age-key", "generate"}, extra...)
	stdout, stderr, code := runCLI(t, args...)
	if code != ExitOK {
		t.Fatalf("bootstrap %s: exit %d: %s", cluster, code, stderr)
	}
	if !strings.Contains(stdout, "name: flotilla-sops-age") || !strings.Contains(stdout, "age.agekey:") {
		t.Fatalf("the install has no age key Secret:\n%s", stdout)
	}
	if !strings.Contains(stderr, "do not commit them") {
		t.Errorf("bootstrap does not warn that the manifests hold a private key:\n%s", stderr)
	}
	key := ageSecretKeyRe.FindString(stdout)
	if key == "" {
		t.Fatal("no private key in the install manifests")
	}
	want, err := sopsdecrypt.RecipientOf([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	clusterFile, err := os.ReadFile(filepath.Join(dir, "clusters", cluster+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(clusterFile), "AGE-SECRET-KEY") {
		t.Fatalf("the private key reached the fleet repo:\n%s", clusterFile)
	}
	if !strings.Contains(string(clusterFile), "ageRecipient: "+want) {
		t.Fatalf("clusters/%s.yaml lacks spec.sops.ageRecipient %s:\n%s", cluster, want, clusterFile)
	}
	if strings.Contains(stderr, key) {
		t.Error("the private key was printed on stderr")
	}
	return want
}

func TestBootstrapSOPSAgeKeyAndRecipients(t *testing.T) {
	dir := initFleet(t)
	r3 := bootstrapWithKey(t, dir, "member3", "--label", "env=production")
	// An existing cluster gets a key with --force, keeping its labels.
	r1 := bootstrapWithKey(t, dir, "member1", "--force")
	if _, out, code := runCLI(t, "validate", "--repo", dir); code != ExitOK {
		t.Fatalf("the repo does not validate after bootstrap: %s", out)
	}

	stdout, stderr, code := runCLI(t, "secrets", "recipients", "member3", "member1", "--repo", dir)
	if code != ExitOK || strings.TrimSpace(stdout) != r1+","+r3 {
		t.Errorf("recipients member3 member1 = %q (exit %d, %s), want %q", stdout, code, stderr, r1+","+r3)
	}

	stdout, _, code = runCLI(t, "secrets", "recipients", "member1", "member3", "member1", "-o", "json", "--repo", dir)
	var rows []clusterRecipient
	if err := json.Unmarshal([]byte(stdout), &rows); code != ExitOK || err != nil {
		t.Fatalf("-o json: exit %d, %v:\n%s", code, err, stdout)
	}
	if len(rows) != 2 || rows[0] != (clusterRecipient{"member1", r1}) || rows[1] != (clusterRecipient{"member3", r3}) {
		t.Errorf("-o json rows = %+v", rows)
	}

	stdout, _, code = runCLI(t, "secrets", "recipients", "member3", "-o", "yaml", "--repo", dir)
	var sopsYAML struct {
		CreationRules []struct {
			PathRegex      string `yaml:"path_regex"`
			EncryptedRegex string `yaml:"encrypted_regex"`
			Age            string `yaml:"age"`
		} `yaml:"creation_rules"`
	}
	if err := yaml.Unmarshal([]byte(stdout), &sopsYAML); code != ExitOK || err != nil || len(sopsYAML.CreationRules) != 2 {
		t.Fatalf("-o yaml: exit %d, %v:\n%s", code, err, stdout)
	}
	if r := sopsYAML.CreationRules[0]; r.Age != r3 || r.EncryptedRegex != "^(data|stringData)$" || !regexp.MustCompile(r.PathRegex).MatchString("apps/x/secret.yaml") {
		t.Errorf("manifest rule = %+v", r)
	}

	stdout, _, code = runCLI(t, "secrets", "recipients", "member3", "-o", "table", "--repo", dir)
	if code != ExitOK || !regexp.MustCompile(`(?m)^member3\s+`+r3+`$`).MatchString(stdout) {
		t.Errorf("-o table (exit %d):\n%s", code, stdout)
	}

	// The production fleet has members without a key; a name that is
	// nothing is an error too. Both are named.
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"production"}, "cluster edge-1 has no spec.sops.ageRecipient"},
		{[]string{"member3", "nosuch"}, "nosuch is neither a fleet nor a cluster"},
	} {
		_, stderr, code := runCLI(t, append([]string{"secrets", "recipients", "--repo", dir}, tc.args...)...)
		if code != ExitError || !strings.Contains(stderr, tc.says) {
			t.Errorf("recipients %v: exit %d, stderr %q; want it to say %q", tc.args, code, stderr, tc.says)
		}
	}
}
