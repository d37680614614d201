package e2e_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/hub/bootstrap"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// shippedRBACKinds are the objects of manifests/base that make up the
// agent's identity and rights in a cluster.
var shippedRBACKinds = []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// TestAgentUnderShippedRBAC runs the flotilla-agent binary as it runs in a
// cluster: authenticated by a token of the ServiceAccount manifests/base
// installs, with exactly the RBAC manifests/base installs, in its
// namespace, with leader election, through the fleet repo template's whole
// lifecycle (TestAgentTemplateLifecycle's). Every other e2e agent uses an
// admin config, which would hide a missing grant.
func TestAgentUnderShippedRBAC(t *testing.T) {
	testenv.NeedsCluster(t)
	// A cluster of its own: the template's apps must not exist yet, and the
	// shared cluster's TestAgentTemplateLifecycle creates them.
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Full, Nodes: agentNodes()})
	kubeconfig := installAgentIdentity(t, c, "manifests/base")
	runTemplateLifecycle(t, c, templateOptions{
		kubeconfig: kubeconfig, namespace: bootstrap.DefaultNamespace, repoName: "template-shipped-rbac",
	})
}

// installAgentIdentity applies the Namespace, ServiceAccount and RBAC of
// the install directory dir to c, as `kubectl apply -k dir` would, and
// returns a kubeconfig with a TokenRequest token of the agent's
// ServiceAccount: what the kubelet mounts into the agent's pod.
func installAgentIdentity(t *testing.T, c *testenv.Cluster, dir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	objs := split(renderKustomize(t, dir), func(o *unstructured.Unstructured) bool {
		return slices.Contains(shippedRBACKinds, o.GetKind())
	})
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	for _, kind := range shippedRBACKinds {
		if kinds[kind] == 0 {
			t.Fatalf("%s has no %s (%v): the agent would not run under its RBAC", dir, kind, kinds)
		}
	}
	// The Namespace first: the rest of the install lives in it.
	if err := serverSideApply(ctx, c.Client(), split(objs, isNamespace), false); err != nil {
		t.Fatal(err)
	}
	if err := serverSideApply(ctx, c.Client(), split(objs, func(o *unstructured.Unstructured) bool { return !isNamespace(o) }), false); err != nil {
		t.Fatal(err)
	}

	ns, sa := bootstrap.DefaultNamespace, "flotilla-agent"
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	expiry := int64(2 * time.Hour / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := c.KubeconfigFor(sa, tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	// The agent really is the ServiceAccount, not an admin.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	saCS, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := saCS.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if who, want := review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":"+sa; who != want {
		t.Fatalf("the agent's kubeconfig authenticates as %q, want %q", who, want)
	}
	if slices.Contains(review.Status.UserInfo.Groups, "system:masters") {
		t.Fatalf("the agent's kubeconfig is in system:masters: %v", review.Status.UserInfo.Groups)
	}
	return kubeconfig
}

// TestAgentUnderNamespacedRBAC: with manifests/overlays/namespaced's
// grant, the agent binary applies a namespaced app in its listed
// namespace and keeps it there against drift, while the units its README
// says cannot work (another namespace, a cluster-scoped object, a
// Namespace) fail with the API server's Forbidden in status, changing
// nothing, without blocking the app.
func TestAgentUnderNamespacedRBAC(t *testing.T) {
	testenv.NeedsCluster(t)
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	k := c.Client()
	// The overlay's example namespace must exist before its Role is
	// applied; "other" exists but is not granted.
	for _, ns := range []string{"team-a", "other"} {
		if err := c.CreateNamespace(testCtx(t), ns); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := installAgentIdentity(t, c, "manifests/overlays/namespaced")

	cm := func(ns, name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\ndata:\n  color: blue\n"
	}
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - objects.yaml\n"
	unit := func(name, objects string) handUnit {
		return handUnit{name: name, files: map[string]string{"kustomization.yaml": kust, "objects.yaml": objects}}
	}
	const cluster = "member-ns"
	dir := t.TempDir()
	writeHandSlice(t, dir, cluster, []handUnit{
		unit("app", cm("team-a", "settings")),
		unit("outside", cm("other", "settings")),
		unit("cluster-scoped", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: flotilla-e2e-forbidden\nrules: []\n"),
		unit("namespace", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n"),
	})
	repo := fleetrepo.New(t, agentGit(t), "namespaced", dir)
	creds := agentUser(t, repo.Server, cluster)
	a := startAgentProcKubeconfig(t, kubeconfig, repo, cluster, bootstrap.DefaultNamespace, cluster+"-agent", t.TempDir(), creds,
		"--interval", "3s", "--leader-elect")

	rev := repo.Head()
	forbidden := []string{"outside", "cluster-scoped", "namespace"}
	st := a.waitStatus(3*time.Minute, "app Ready and the others Forbidden at "+rev, func(st *status.ClusterStatus) bool {
		if st.FetchedRevision != rev || unitOf(st, "app") == nil || !unitIsReady(unitOf(st, "app")) {
			return false
		}
		for _, name := range forbidden {
			u := unitOf(st, name)
			if u == nil || unitIsReady(u) || !strings.Contains(strings.ToLower(u.LastError), "forbidden") {
				return false
			}
		}
		return true
	})
	for _, name := range forbidden {
		u := unitOf(st, name)
		if c := condOf(u.Conditions, status.ConditionReady); c == nil || c.Reason != status.ReasonApplyFailed {
			t.Errorf("unit %s: Ready condition %+v, want reason %s", name, c, status.ReasonApplyFailed)
		}
		t.Logf("unit %s: %s", name, u.LastError)
	}

	// Nothing outside the grant exists; the app's object does.
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: "team-a", Name: "settings"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("team-a/settings: %v", err)
	}
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "settings"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-e2e-forbidden"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}},
	} {
		if err := k.Get(testCtx(t), client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s: %v, want NotFound", o, client.ObjectKeyFromObject(o), err)
		}
	}

	// Drift in the granted namespace is corrected with these rights too.
	editColor(t, k, "team-a", "red")
	waitColor(t, k, "team-a", "blue", 2*time.Minute)
}
