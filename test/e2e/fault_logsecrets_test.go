package e2e_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// TestFaultLogsHoldNoSecrets runs the real agent at debug level with a Git
// password and a bearer token in its credentials, and units whose Secrets
// fail to apply (a wrong type beside real data, an invalid label, an
// invalid key, a value that is not base64), then scans its whole log and status file: neither
// credential nor any Secret data value appears, plain or base64. (Names,
// keys and labels are metadata, not Secret data: the API server quotes
// invalid ones, and so do the logs.)
func TestFaultLogsHoldNoSecrets(t *testing.T) {
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	srv := agentGit(t)
	const cluster, ns, agentNS = "log-secrets", "log-secrets-app", "flotilla-log-secrets"
	const (
		password   = "gitpw-Zq8vN3kLr7TxW2"
		token      = "bearer-Yp4mH9sJd6QcV1"
		dataValue  = "s3cr3t-data-Hk2Lp9Xw"
		typedValue = "s3cr3t-typed-Mv7Qs1Rn"
		labelValue = "label-Bx5Tn8Wc"
		keyValue   = "key-Gf3Jd6Pz"
		b64Value   = "s3cr3t-notbase64-Wd4Kx2Nq!"
	)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	secretFile := func(name, body string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\n" + body
	}
	files := map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - typed.yaml\n  - label.yaml\n  - key.yaml\n  - b64.yaml\n",
		// data.n is a number: the schema refuses the whole object, next to
		// a well-formed value.
		"typed.yaml": secretFile("typed", "data:\n  good: "+b64(dataValue)+"\n  n: 12345\nstringData:\n  other: "+typedValue+"\n"),
		// A label value that is not a valid label: validation quotes it.
		"label.yaml": secretFile("label", "  labels:\n    leak: \"!"+labelValue+"!\"\nstringData:\n  k: "+dataValue+"\n"),
		// A data key that is not a valid key: validation quotes the key.
		"key.yaml": secretFile("key", "stringData:\n  \"bad key "+keyValue+"\": "+dataValue+"\n"),
		// A data value that is not base64: decoding errors may quote it.
		"b64.yaml": secretFile("b64", "data:\n  x: \""+b64Value+"\"\n"),
	}
	dir := t.TempDir()
	writeHandSlice(t, dir, cluster, []handUnit{{name: "secrets", files: files}})
	repo := fleetrepo.New(t, srv, cluster, dir)
	// The namespace exists beforehand: one the unit created would be
	// rolled back with the failed apply and, without a namespace
	// controller, stay Terminating, refusing the next cycles' Secrets.
	for _, n := range []string{agentNS, ns} {
		if err := c.CreateNamespace(testCtx(t), n); err != nil {
			t.Fatal(err)
		}
	}
	user := gitserver.AgentUser(cluster)
	if err := srv.AddUser(user, password, gitserver.AgentRule(cluster)); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddToken(user, token); err != nil {
		t.Fatal(err)
	}
	creds := credentialsWithToken(t, user, password, token)
	cache := t.TempDir()
	p := startAgentProc(t, c, repo, cluster, agentNS, "log-secrets-agent", cache, creds, "--interval", "2s")
	rev := repo.Head()
	p.waitStatus(2*time.Minute, "the Secret unit to fail", func(st *status.ClusterStatus) bool {
		u := unitOf(st, "secrets")
		return st.FetchedRevision == rev && u != nil && u.LastError != "" && !unitIsReady(u)
	})
	p.WaitCycle(p.Cycles()+1, 2*time.Minute) // one more cycle: its records too

	if code := p.terminate(2 * time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	logData, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	statusData, err := os.ReadFile(filepath.Join(cache, "status.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	st := p.status()
	t.Logf("unit error (as the status has it): %s", unitOf(st, "secrets").LastError)
	if !strings.Contains(string(logData), "unit failed") {
		t.Error("the log has no unit failure: the test did not exercise an apply error")
	}
	for _, meta := range []string{labelValue, keyValue} {
		t.Logf("metadata %q quoted in the log: %v", meta, strings.Contains(string(logData), meta))
	}
	for _, s := range []string{password, token, dataValue, typedValue, b64Value} {
		for _, form := range []string{s, b64(s)} {
			if strings.Contains(string(logData), form) {
				t.Errorf("the log (%d bytes) contains a secret %q", len(logData), form)
			}
			if strings.Contains(string(statusData), form) {
				t.Errorf("status.yaml contains a secret %q", form)
			}
		}
	}
}

// credentialsWithToken writes a credentials directory like a mounted
// Secret with username, password and bearerToken.
func credentialsWithToken(t *testing.T, user, password, token string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range map[string]string{gitrepo.SecretUsername: user, gitrepo.SecretPassword: password, gitrepo.SecretBearerToken: token} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
