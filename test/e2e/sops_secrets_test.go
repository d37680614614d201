package e2e_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/sopscli"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// TestSOPSSecretsDecryptOnlyWhereKeyed runs two real agent processes, for
// clusters "sops-keyed" and "sops-other", on one API server. Both slices
// hold the same Secrets, encrypted by the real sops CLI for sops-keyed's
// age recipient only: a manifest (data and stringData encrypted) and a
// dotenv file behind a secretGenerator. The keyed agent, holding its key in
// the Secret flotilla-sops-age, applies them decrypted; the other agent,
// holding a key of its own, reports the unit DecryptionFailed naming the
// file and still applies its unencrypted unit; given the key in its
// Secret, it applies them at its next cycle. Neither agent's log nor
// status carries a plaintext, plain or base64.
func TestSOPSSecretsDecryptOnlyWhereKeyed(t *testing.T) {
	sopscli.Require(t)
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	srv := agentGit(t)
	const (
		password = "s3cr3t-db-Qm7Vx2Lk9"
		apiToken = "s3cr3t-env-Rt4Wn8Jc3"
	)
	keyedKey := sopscli.NewKey(t)
	keyedFile, keyedRecipient, otherFile := keyedKey.File, keyedKey.Recipient, sopscli.NewKey(t).File
	regex := sopscli.Options{EncryptedRegex: "^(data|stringData)$"}
	secretYAML := sopscli.Encrypt(t, "db.enc.yaml", []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n"+
		"type: Opaque\nstringData:\n  password: "+password+"\n"), regex, keyedRecipient)
	envFile := sopscli.Encrypt(t, "api.env", []byte("API_TOKEN="+apiToken+"\nMODE=live\n"), sopscli.Options{}, keyedRecipient)

	type agentRun struct {
		cluster, agentNS, appNS string
		key                     []byte
		proc                    *agentProc
		cache                   string
	}
	runs := []*agentRun{
		{cluster: "sops-keyed", agentNS: "flotilla-sops-keyed", appNS: "sops-keyed-app", key: keyedFile},
		{cluster: "sops-other", agentNS: "flotilla-sops-other", appNS: "sops-other-app", key: otherFile},
	}
	for _, r := range runs {
		for _, ns := range []string{r.agentNS, r.appNS} {
			if err := c.CreateNamespace(testCtx(t), ns); err != nil {
				t.Fatal(err)
			}
		}
		keySecret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "flotilla-sops-age", Namespace: r.agentNS},
			Data:       map[string][]byte{"age.agekey": r.key},
		}
		if err := c.Client().Create(testCtx(t), keySecret); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + r.appNS + "\n" +
			"resources:\n  - db.enc.yaml\nsecretGenerator:\n  - name: api\n    envs: [api.env]\n" +
			"generatorOptions:\n  disableNameSuffixHash: true\n"
		writeHandSlice(t, dir, r.cluster, []handUnit{
			{name: "secrets", files: map[string]string{"kustomization.yaml": kustomization, "db.enc.yaml": string(secretYAML), "api.env": string(envFile)}},
			{name: "plain", files: map[string]string{
				"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - cm.yaml\n",
				"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n  namespace: " + r.appNS + "\ndata:\n  k: v\n",
			}},
		})
		repo := fleetrepo.New(t, srv, r.cluster, dir)
		r.cache = t.TempDir()
		r.proc = startAgentProc(t, c, repo, r.cluster, r.agentNS, r.cluster+"-agent", r.cache, agentUser(t, srv, r.cluster), "--interval", "2s")
	}
	keyed, other := runs[0], runs[1]

	keyed.proc.waitStatus(2*time.Minute, "the keyed cluster to apply both units", allUnitsReady)
	var db, api corev1.Secret
	if err := c.Client().Get(testCtx(t), client.ObjectKey{Namespace: keyed.appNS, Name: "db"}, &db); err != nil {
		t.Fatal(err)
	}
	if got := string(db.Data["password"]); got != password {
		t.Errorf("Secret db password = %q, want the decrypted value", got)
	}
	if err := c.Client().Get(testCtx(t), client.ObjectKey{Namespace: keyed.appNS, Name: "api"}, &api); err != nil {
		t.Fatal(err)
	}
	if string(api.Data["API_TOKEN"]) != apiToken || string(api.Data["MODE"]) != "live" || len(api.Data) != 2 {
		t.Errorf("Secret api from the encrypted .env has keys %v, want API_TOKEN (decrypted) and MODE only", keysOf(api.Data))
	}

	wantFile := slice.UnitDir(other.cluster, "secrets") + "/db.enc.yaml"
	st := other.proc.waitStatus(2*time.Minute, "the other cluster to report DecryptionFailed and apply its plain unit", func(st *status.ClusterStatus) bool {
		u, p := unitOf(st, "secrets"), unitOf(st, "plain")
		if u == nil || p == nil || !unitIsReady(p) {
			return false
		}
		ready := condOf(u.Conditions, status.ConditionReady)
		return ready != nil && ready.Reason == status.ReasonDecryptionFailed
	})
	ready := condOf(unitOf(st, "secrets").Conditions, status.ConditionReady)
	t.Logf("sops-other's unit: %s: %s", ready.Reason, ready.Message)
	if !strings.Contains(ready.Message, wantFile) || !strings.Contains(ready.Message, keyedRecipient) {
		t.Errorf("DecryptionFailed message %q should name %s and the recipient it is encrypted for", ready.Message, wantFile)
	}
	if err := c.Client().Get(testCtx(t), client.ObjectKey{Namespace: other.appNS, Name: "db"}, &corev1.Secret{}); err == nil {
		t.Error("the cluster without the key has Secret db")
	}
	var cm corev1.ConfigMap
	if err := c.Client().Get(testCtx(t), client.ObjectKey{Namespace: other.appNS, Name: "plain"}, &cm); err != nil {
		t.Errorf("the other cluster's unencrypted unit was not applied: %v", err)
	}
	other.proc.WaitCycle(other.proc.Cycles()+1, 2*time.Minute) // its records of a failing cycle too

	// The cluster is given the key (beside its own, as during a rotation):
	// the agent reads its Secret at every render, no restart, no commit.
	var keySecret corev1.Secret
	if err := c.Client().Get(testCtx(t), client.ObjectKey{Namespace: other.agentNS, Name: "flotilla-sops-age"}, &keySecret); err != nil {
		t.Fatal(err)
	}
	keySecret.Data["age.agekey"] = append(append([]byte{}, otherFile...), keyedFile...)
	if err := c.Client().Update(testCtx(t), &keySecret); err != nil {
		t.Fatal(err)
	}
	other.proc.waitStatus(2*time.Minute, "the other cluster to apply the Secrets once it holds the key", allUnitsReady)
	if err := c.Client().Get(testCtx(t), client.ObjectKey{Namespace: other.appNS, Name: "db"}, &db); err != nil || string(db.Data["password"]) != password {
		t.Errorf("after the key was added, Secret db: %v (password decrypted: %v)", err, string(db.Data["password"]) == password)
	}

	for _, r := range runs {
		if code := r.proc.terminate(2 * time.Minute); code != 0 {
			t.Errorf("%s: exit code %d after SIGTERM", r.cluster, code)
		}
		t.Logf("%s: agent peak RSS %d MiB", r.cluster, r.proc.PeakRSS()>>20)
		logData, err := os.ReadFile(r.proc.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		statusData, err := os.ReadFile(filepath.Join(r.cache, "status.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if len(logData) == 0 {
			t.Errorf("%s: empty log", r.cluster)
		}
		for _, s := range []string{password, apiToken, "AGE-SECRET-KEY-"} {
			for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s))} {
				if strings.Contains(string(logData), form) {
					t.Errorf("%s: the log contains %q", r.cluster, form)
				}
				if strings.Contains(string(statusData), form) {
					t.Errorf("%s: status.yaml contains %q", r.cluster, form)
				}
			}
		}
	}
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
