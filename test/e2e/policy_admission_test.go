package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/hub/identity"
)

// The policy test's objects are cluster-wide (policies) or in namespaces
// of its own, labelled so that its policies touch nothing else on the
// shared cluster.
const (
	policyNS       = "fleetext-policy"
	policyExemptNS = "fleetext-policy-system"
	azureClientID  = "8a5c3a2e-1b7d-4d2f-9c1e-0f6b2a7d9e41"
)

func policyRepoFiles() map[string]string {
	return map[string]string{
		"clusters/e2e.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: e2e
  labels: {env: e2e, provider: azure}
spec:
  kubernetesVersion: v1.36.3
`,
		"fleets/e2e.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: e2e
spec:
  clusters: [e2e]
  namespaces:
    - name: ` + policyNS + `
      labels: {flotilla-e2e: fleetext}
    - name: ` + policyExemptNS + `
      labels: {flotilla-e2e: fleetext}
  workloadIdentity:
    - namespace: ` + policyNS + `
      serviceAccount: web
      roles:
        azure: ` + azureClientID + `
`,
		"policies/e2e-no-privileged.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: FleetPolicy
metadata:
  name: e2e-no-privileged
spec:
  destination:
    fleet: e2e
  match:
    namespaceSelector:
      matchLabels: {flotilla-e2e: fleetext}
  exclude:
    namespaces: [` + policyExemptNS + `]
  rules:
    - noPrivileged: {}
    - requiredLabels:
        labels: [team]
`,
		"policies/e2e-registries.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: FleetPolicy
metadata:
  name: e2e-registries
spec:
  destination:
    fleet: e2e
  validationActions: [Warn]
  match:
    namespaceSelector:
      matchLabels: {flotilla-e2e: fleetext}
  rules:
    - allowedRegistries:
        registries: [registry.k8s.io]
`,
		// A control for the type check: compiles (object is dynamic at
		// render time) but names a field Deployments do not have; Audit
		// only, so it changes no request.
		"policies/e2e-typo.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: FleetPolicy
metadata:
  name: e2e-typo
spec:
  destination:
    fleet: e2e
  validationActions: [Audit]
  match:
    resourceRules:
      - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
    namespaceSelector:
      matchLabels: {flotilla-e2e: fleetext}
  rules:
    - cel:
        expression: "object.spec.replicaz >= 0"
`,
		"apps/web/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: web
spec:
  source:
    manifests:
      path: manifests
  namespace: ` + policyNS + `
  syncPolicies:
    - destination:
        fleet: e2e
`,
		"apps/web/manifests/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {team: web}
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web, team: web}
    spec:
      serviceAccountName: web
      containers:
        - name: web
          image: registry.k8s.io/pause:3.10
`,
	}
}

// warnings collects the API server's warnings for one client.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

func testPod(ns, name string, labels map[string]string, image string, privileged bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: image}},
		},
	}
	if privileged {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &privileged}
	}
	return p
}

// TestPolicyAdmission renders two FleetPolicies and a workload identity
// with the hub's code, applies the slice as an agent does, and checks that
// the cluster's own API server enforces the generated
// ValidatingAdmissionPolicies: privileged Pods and Deployments are denied
// with a message naming the policy, compliant ones admitted, an exempt
// namespace is exempt, a Warn policy only warns; the API server's type
// check of every generated expression finds nothing; the ServiceAccount
// carries the Azure workload identity.
func TestPolicyAdmission(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	// The cluster is shared: a test that applied the template leaves its
	// production policy (no-privileged) bound cluster-wide, and it would
	// deny before this test's policies do.
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := k.List(testCtx(t), &bindings); err != nil {
		t.Fatal(err)
	}
	for i := range bindings.Items {
		if b := &bindings.Items[i]; !strings.HasPrefix(b.Name, "e2e-") {
			if err := k.Delete(testCtx(t), b); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
	repo := newFleetExtRepo(t, c, "e2e", "fleetext-policy-inventory", policyRepoFiles())
	s, _ := repo.renderAndApply()
	var names []string
	for _, u := range s.Units {
		names = append(names, u.Name)
	}
	if got := strings.Join(names, " "); got != "flotilla-namespaces flotilla-policies flotilla-identity web" {
		t.Fatalf("units %s", got)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, n := range []string{"e2e-no-privileged", "e2e-registries", "e2e-typo"} {
			_ = k.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: n}})
			_ = k.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	})

	t.Run("type checked", func(t *testing.T) {
		// kube-controller-manager type-checks each policy's expressions
		// against the schemas of the kinds it matches.
		for _, name := range []string{"e2e-no-privileged", "e2e-registries", "e2e-typo"} {
			var vap admissionregistrationv1.ValidatingAdmissionPolicy
			waitFor(t, time.Minute, "policy "+name+" type checked", func() (bool, string) {
				if err := k.Get(testCtx(t), client.ObjectKey{Name: name}, &vap); err != nil {
					return false, err.Error()
				}
				st := vap.Status
				return st.ObservedGeneration == vap.Generation && st.TypeChecking != nil, "status " + st.String()
			})
			w := vap.Status.TypeChecking.ExpressionWarnings
			switch {
			case name == "e2e-typo":
				if len(w) != 1 || !strings.Contains(w[0].Warning, "replicaz") {
					t.Errorf("policy e2e-typo: type check warnings %v, want one about replicaz", w)
				}
			case len(w) > 0:
				t.Errorf("policy %s: type check warnings %v", name, w)
			}
		}
	})

	w := &warnings{}
	cfg := c.RESTConfig()
	cfg.WarningHandler = w
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for _, ns := range []string{policyNS, policyExemptNS} {
		waitFor(t, time.Minute, "default ServiceAccount in "+ns, func() (bool, string) {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, "missing"
		})
	}
	team := map[string]string{"team": "web"}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	// Policies and bindings reach the admission plugin through informers,
	// so a binding deleted above may still deny for a while, and this
	// test's may not deny yet: wait until each of its three policies acts,
	// by dry runs, and nothing else denies.
	waitFor(t, time.Minute, "this test's policies enforced, and only them", func() (bool, string) {
		_, err := cs.CoreV1().Pods(policyNS).Create(ctx, testPod(policyNS, "probe", team, "registry.k8s.io/pause:3.10", true), dryRun)
		if err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'e2e-no-privileged'") {
			return false, fmt.Sprintf("privileged probe: %v", err)
		}
		if _, err := cs.CoreV1().Pods(policyNS).Create(ctx, testPod(policyNS, "probe", nil, "registry.k8s.io/pause:3.10", false), dryRun); err == nil ||
			!strings.Contains(err.Error(), "required labels are missing: team") {
			return false, fmt.Sprintf("unlabelled probe: %v", err)
		}
		w.take()
		if _, err := cs.CoreV1().Pods(policyNS).Create(ctx, testPod(policyNS, "probe", team, "docker.io/library/busybox:1.37", false), dryRun); err != nil {
			return false, fmt.Sprintf("registry probe: %v", err)
		}
		if got := strings.Join(w.take(), "\n"); !strings.Contains(got, "e2e-registries") {
			return false, fmt.Sprintf("registry probe warnings %q", got)
		}
		if _, err := cs.CoreV1().Pods(policyExemptNS).Create(ctx, testPod(policyExemptNS, "probe", team, "registry.k8s.io/pause:3.10", true), dryRun); err != nil {
			return false, fmt.Sprintf("exempt probe: %v", err)
		}
		return true, ""
	})
	w.take()

	t.Run("privileged pod denied", func(t *testing.T) {
		_, err := cs.CoreV1().Pods(policyNS).Create(ctx, testPod(policyNS, "priv", team, "registry.k8s.io/pause:3.10", true), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("want Forbidden, got %v", err)
		}
		t.Logf("denied: %v", err)
		for _, want := range []string{"ValidatingAdmissionPolicy 'e2e-no-privileged'", "privileged containers are not allowed: app"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("denial %q lacks %q", err, want)
			}
		}
	})
	t.Run("privileged deployment denied", func(t *testing.T) {
		priv := true
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "priv", Namespace: policyNS, Labels: team},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "priv"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "priv", "team": "web"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10",
						SecurityContext: &corev1.SecurityContext{Privileged: &priv}}}},
				},
			},
		}
		_, err := cs.AppsV1().Deployments(policyNS).Create(ctx, d, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "e2e-no-privileged") || !strings.Contains(err.Error(), "privileged containers are not allowed: agent") {
			t.Fatalf("want a denial by e2e-no-privileged, got %v", err)
		}
	})
	t.Run("missing label denied", func(t *testing.T) {
		_, err := cs.CoreV1().Pods(policyNS).Create(ctx, testPod(policyNS, "unlabelled", nil, "registry.k8s.io/pause:3.10", false), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "required labels are missing: team") {
			t.Fatalf("want a denial for the team label, got %v", err)
		}
	})
	t.Run("compliant pod admitted", func(t *testing.T) {
		if _, err := cs.CoreV1().Pods(policyNS).Create(ctx, testPod(policyNS, "ok", team, "registry.k8s.io/pause:3.10", false), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := w.take(); len(got) > 0 {
			t.Errorf("warnings for a compliant pod: %v", got)
		}
	})
	t.Run("exempt namespace", func(t *testing.T) {
		if _, err := cs.CoreV1().Pods(policyExemptNS).Create(ctx, testPod(policyExemptNS, "priv", team, "registry.k8s.io/pause:3.10", true), metav1.CreateOptions{}); err != nil {
			t.Fatalf("a privileged pod in the exempt namespace: %v", err)
		}
	})
	t.Run("warn only", func(t *testing.T) {
		w.take()
		if _, err := cs.CoreV1().Pods(policyNS).Create(ctx, testPod(policyNS, "elsewhere", team, "docker.io/library/busybox:1.37", false), metav1.CreateOptions{}); err != nil {
			t.Fatalf("a Warn policy must admit: %v", err)
		}
		got := strings.Join(w.take(), "\n")
		if !strings.Contains(got, "e2e-registries") || !strings.Contains(got, "images from registries that are not allowed: docker.io/library/busybox:1.37") {
			t.Errorf("warnings %q", got)
		}
	})
	t.Run("identity and application", func(t *testing.T) {
		var sa corev1.ServiceAccount
		if err := k.Get(ctx, client.ObjectKey{Namespace: policyNS, Name: "web"}, &sa); err != nil {
			t.Fatal(err)
		}
		if sa.Annotations[identity.AzureClientIDAnnotation] != azureClientID || sa.Labels[identity.AzureUseLabel] != "true" {
			t.Errorf("ServiceAccount metadata: %v %v", sa.Annotations, sa.Labels)
		}
		// The application was applied after both, through the policies.
		d, err := getDeployment(t, k, policyNS, "web")
		if err != nil {
			t.Fatal(err)
		}
		if d.Spec.Template.Spec.ServiceAccountName != "web" {
			t.Errorf("deployment web uses %q", d.Spec.Template.Spec.ServiceAccountName)
		}
	})
}
