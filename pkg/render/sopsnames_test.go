package render

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/test/sopscli"
)

// generatedOverSOPS is a unit whose secretGenerator and configMapGenerator
// read SOPS files (and one generator reads none), with a name prefix and a
// Deployment referring to each generated object.
var generatedOverSOPS = map[string]string{
	"kustomization.yaml": `namePrefix: shop-
resources: [deployment.yaml]
secretGenerator:
- name: db
  envs: [db.env]
- name: plain
  literals: [MODE=fast]
configMapGenerator:
- name: settings
  files: [settings.conf]
`,
	"deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: api
        image: api:1
        envFrom:
        - secretRef: {name: db}
        - secretRef: {name: plain}
        env:
        - name: PASSWORD
          valueFrom: {secretKeyRef: {name: db, key: PASSWORD}}
      volumes:
      - name: settings
        configMap: {name: settings}
`,
	"db.env":        "USER=admin\nPASSWORD=" + sopsWord + "\n",
	"settings.conf": "token = " + sopsWord + "\n",
}

// TestGeneratedNamesOverSOPS: the hub cannot know the hash kustomize
// appends to a generator's name over encrypted inputs (the cluster hashes
// the plaintext), so its render names such an object, and every
// reference to it, "<name>-<hash decided on the cluster>"; the agent's
// render names it exactly as kustomize does from the plaintext, and a
// generator over no encrypted input keeps kustomize's name on the hub too.
func TestGeneratedNamesOverSOPS(t *testing.T) {
	sopscli.Require(t)
	k := sopscli.NewKey(t)
	const dir = "rendered/c1/shop"
	plain, encrypted := map[string]string{}, map[string]string{}
	for name, content := range generatedOverSOPS {
		plain[dir+"/"+name] = content
		encrypted[dir+"/"+name] = content
		if name == "db.env" || name == "settings.conf" {
			enc := sopscli.Encrypt(t, name, []byte(content), sopscli.Options{}, k.Recipient)
			encrypted[dir+"/"+name] = string(enc)
			// The plaintext as sops gives it back.
			plain[dir+"/"+name] = string(sopscli.Decrypt(t, name, enc, k.File, ""))
		}
	}
	u := unitAt("shop", "kustomize", dir)

	// The oracle: kustomize on sops' plaintext, no SOPS file anywhere.
	want, err := Unit(context.Background(), writeTree(t, plain), u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	root := writeTree(t, encrypted)
	agent, err := Unit(context.Background(), root, u, Options{Decryptor: keyring(k.Identities)})
	if err != nil {
		t.Fatal(err)
	}
	if got, w := generatedRefs(agent.Objects), generatedRefs(want.Objects); !slices.Equal(got, w) {
		t.Errorf("the agent's names and references\n  %s\nkustomize's on the plaintext\n  %s", strings.Join(got, "\n  "), strings.Join(w, "\n  "))
	}

	hub, err := Unit(context.Background(), root, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wantHub []string
	for _, s := range generatedRefs(want.Objects) {
		for _, base := range []string{"shop-db-", "shop-settings-"} {
			if i := strings.Index(s, base); i >= 0 {
				s = s[:i+len(base)] + ClusterHash
			}
		}
		wantHub = append(wantHub, s)
	}
	slices.Sort(wantHub)
	got := generatedRefs(hub.Objects)
	slices.Sort(got)
	if !slices.Equal(got, wantHub) {
		t.Errorf("the hub's names and references\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(wantHub, "\n  "))
	}
	if y, _ := hub.YAML(); strings.Contains(string(y), sopsWord) {
		t.Error("the hub's render holds the plaintext")
	}
}

// generatedRefs lists each generated object's kind and name, and each
// reference the Deployment makes, in render order.
func generatedRefs(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		switch o.GetKind() {
		case "Secret", "ConfigMap":
			out = append(out, o.GetKind()+" "+o.GetName())
		case "Deployment":
			spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
			c := spec["containers"].([]any)[0].(map[string]any)
			for _, e := range c["envFrom"].([]any) {
				out = append(out, "envFrom "+e.(map[string]any)["secretRef"].(map[string]any)["name"].(string))
			}
			env := c["env"].([]any)[0].(map[string]any)
			n, _, _ := unstructured.NestedString(env, "valueFrom", "secretKeyRef", "name")
			out = append(out, "secretKeyRef "+n)
			v, _, _ := unstructured.NestedString(spec["volumes"].([]any)[0].(map[string]any), "configMap", "name")
			out = append(out, "volume "+v)
		}
	}
	return out
}
