package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/hub/bootstrap"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

const installFieldOwner = "flotilla-install-test"

// serverSideApply applies objs in order with server-side apply, for real or
// as a dry run. Server-side apply refuses a field the schema does not
// declare, so a misspelt field fails here.
func serverSideApply(ctx context.Context, cl client.Client, objs []*unstructured.Unstructured, dryRun bool) error {
	for _, o := range objs {
		opts := []client.ApplyOption{client.FieldOwner(installFieldOwner), client.ForceOwnership}
		if dryRun {
			opts = append(opts, client.DryRunAll)
		}
		if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), opts...); err != nil {
			return fmt.Errorf("apply %s: %w", objectID(o), err)
		}
	}
	return nil
}

func split(objs []*unstructured.Unstructured, keep func(*unstructured.Unstructured) bool) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

func isNamespace(o *unstructured.Unstructured) bool { return o.GetKind() == "Namespace" }
func isClusterScoped(o *unstructured.Unstructured) bool {
	return o.GetNamespace() == ""
}

// agentPod is a Pod made from the DaemonSet's template, as the DaemonSet
// controller would make it: what Pod Security admission judges.
func agentPod(t testing.TB, objs []*unstructured.Unstructured, name string) *corev1.Pod {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		tmpl, ok, err := unstructured.NestedMap(o.Object, "spec", "template")
		if err != nil || !ok {
			t.Fatalf("%s: no pod template: %v", objectID(o), err)
		}
		var pt corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pt); err != nil {
			t.Fatal(err)
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.GetNamespace(), Labels: pt.Labels},
			Spec:       pt.Spec,
		}
	}
	t.Fatal("no DaemonSet")
	return nil
}

// TestInstallServerSideDryRun: the base, each overlay, the chart and a
// bootstrapped install are accepted by a real kube-apiserver with
// server-side apply in dry-run mode (which checks every field against the
// schema). A
// namespace cannot be dry-run into existence for the objects inside it, so
// the Namespace objects (and, for the pod check, the ServiceAccount) are
// applied for real between the two dry-run phases; nothing else is stored.
// A Pod made from the DaemonSet's template passes the namespace's Pod
// Security level (restricted by default, privileged for the edge's hostPath
// cache), and the edge pod is refused under restricted, so that check is
// not vacuous.
func TestInstallServerSideDryRun(t *testing.T) {
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	cl := c.Client()
	ctx := t.Context()

	bootOpts := bootstrap.InstallOptions{
		Cluster: "member1", RepoURL: "https://git.example.com/fleet.git",
		Namespace: "flotilla-member1", CredentialsSecret: "fleet-git",
	}
	boot, err := bootstrap.InstallObjects(ctx, bootOpts)
	if err != nil {
		t.Fatal(err)
	}
	edge := renderKustomize(t, "manifests/overlays/edge")
	appliedForReal := map[string]bool{} // by earlier cases too
	cases := []struct {
		name          string
		objs          []*unstructured.Unstructured
		appNamespaces []string
		podSecurity   string
	}{
		{"base", renderKustomize(t, "manifests/base"), nil, "restricted"},
		{"chart", renderChart(t, "test/e2e/testdata/chart-values/base.yaml"), nil, "restricted"},
		{"namespaced", renderKustomize(t, "manifests/overlays/namespaced"), []string{"team-a"}, "restricted"},
		{"edge", edge, nil, "privileged"},
		{"bootstrap", boot, nil, "restricted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clusterScoped := split(tc.objs, isClusterScoped)
			namespaced := split(tc.objs, func(o *unstructured.Unstructured) bool { return !isClusterScoped(o) })
			if len(clusterScoped) == 0 || len(namespaced) == 0 {
				t.Fatalf("%d cluster-scoped and %d namespaced objects", len(clusterScoped), len(namespaced))
			}
			if err := serverSideApply(ctx, cl, clusterScoped, true); err != nil {
				t.Fatalf("dry run: %v", err)
			}
			if err := serverSideApply(ctx, cl, split(tc.objs, isNamespace), false); err != nil {
				t.Fatal(err)
			}
			for _, o := range split(tc.objs, isNamespace) {
				appliedForReal[objectID(o)] = true
			}
			for _, ns := range tc.appNamespaces {
				if err := c.CreateNamespace(ctx, ns); err != nil {
					t.Fatal(err)
				}
			}
			if err := serverSideApply(ctx, cl, namespaced, true); err != nil {
				t.Fatalf("dry run: %v", err)
			}
			for _, o := range tc.objs {
				if appliedForReal[objectID(o)] {
					continue
				}
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(o.GroupVersionKind())
				err := cl.Get(ctx, client.ObjectKeyFromObject(o), got)
				if !apierrors.IsNotFound(err) {
					t.Errorf("%s after a dry run: %v, want NotFound", objectID(o), err)
				}
			}

			sa := split(namespaced, func(o *unstructured.Unstructured) bool {
				return o.GetKind() == "ServiceAccount" && o.GetName() == "flotilla-agent"
			})
			if len(sa) != 1 {
				t.Fatalf("%d flotilla-agent ServiceAccounts", len(sa))
			}
			if err := serverSideApply(ctx, cl, sa, false); err != nil {
				t.Fatal(err)
			}
			appliedForReal[objectID(sa[0])] = true
			pod := agentPod(t, tc.objs, "probe-"+tc.name)
			var ns corev1.Namespace
			if err := cl.Get(ctx, client.ObjectKey{Name: pod.Namespace}, &ns); err != nil {
				t.Fatal(err)
			}
			if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != tc.podSecurity {
				t.Errorf("namespace %s enforces %q, want %q", ns.Name, got, tc.podSecurity)
			}
			if err := cl.Create(ctx, pod, client.DryRunAll); err != nil {
				t.Errorf("agent pod refused in %s (%s): %v", pod.Namespace, tc.podSecurity, err)
			}
		})
	}

	t.Run("edge pod under restricted", func(t *testing.T) {
		pod := agentPod(t, edge, "probe-edge-restricted")
		pod.Namespace = bootOpts.Namespace // restricted, from the bootstrap case
		err := cl.Create(ctx, pod, client.DryRunAll)
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "restricted") {
			t.Errorf("edge pod (hostPath, root init container) in a restricted namespace: %v, want a Pod Security refusal", err)
		}
	})
}

// TestInstallDaemonSetOnKwokNodes: a bootstrapped install, applied for real
// to a full cluster, gets one agent pod per eligible node, scheduled and
// Running on kwok nodes (the image is never pulled: kwok plays the
// kubelet); the tainted edge node gets none. Re-applying with the edge
// overlay moves the agents to the edge node only.
func TestInstallDaemonSetOnKwokNodes(t *testing.T) {
	edgeTaint := corev1.Taint{Key: "node-role.kubernetes.io/edge", Effect: corev1.TaintEffectNoSchedule}
	nodes := testenv.Nodes("cloud", 2, testenv.NodeSpec{})
	nodes = append(nodes, testenv.Nodes("edge", 1, testenv.NodeSpec{
		Labels: map[string]string{"type": "edge"}, Taints: []corev1.Taint{edgeTaint},
	})...)
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Full, Nodes: nodes})
	cl := c.Client()
	ctx := t.Context()

	objs, err := bootstrap.InstallObjects(ctx, bootstrap.InstallOptions{
		Cluster: "member1", RepoURL: "https://git.example.com/fleet.git",
	})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := serverSideApply(ctx, cl, objs, false); err != nil {
		t.Fatal(err)
	}
	waitAgentPods(t, cl, []string{"cloud-0", "cloud-1"})
	t.Logf("agent pods Running on both cloud nodes %s after the apply", time.Since(began).Round(time.Millisecond))

	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(bootstrap.DefaultNamespace), client.MatchingLabels{"app.kubernetes.io/name": "flotilla-agent"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		agent := p.Spec.Containers[0]
		if agent.Image != bootstrap.DefaultImage() || p.Spec.ServiceAccountName != "flotilla-agent" {
			t.Errorf("pod %s: image %s, service account %s", p.Name, agent.Image, p.Spec.ServiceAccountName)
		}
		if len(agent.EnvFrom) != 1 || agent.EnvFrom[0].ConfigMapRef.Name != bootstrap.ConfigMapName {
			t.Errorf("pod %s does not read %s", p.Name, bootstrap.ConfigMapName)
		}
	}
	var cm corev1.ConfigMap
	if err := cl.Get(ctx, client.ObjectKey{Namespace: bootstrap.DefaultNamespace, Name: bootstrap.ConfigMapName}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["FLOTILLA_CLUSTER_NAME"] != "member1" || cm.Data["FLOTILLA_REPO_URL"] != "https://git.example.com/fleet.git" ||
		cm.Annotations[bootstrap.StatusRefAnnotation] != "refs/heads/flotilla/status/member1" {
		t.Errorf("agent settings in the cluster: %v %v", cm.Data, cm.Annotations)
	}

	began = time.Now()
	if err := serverSideApply(ctx, cl, renderKustomize(t, "manifests/overlays/edge"), false); err != nil {
		t.Fatal(err)
	}
	waitAgentPods(t, cl, []string{"edge-0"})
	t.Logf("agents moved to the edge node %s after the apply", time.Since(began).Round(time.Millisecond))
}

// waitAgentPods waits until the agent pods are exactly one Running pod on
// each of the given nodes, and no other.
func waitAgentPods(t *testing.T, cl client.Client, wantNodes []string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		var pods corev1.PodList
		if err := cl.List(t.Context(), &pods, client.InNamespace(bootstrap.DefaultNamespace),
			client.MatchingLabels{"app.kubernetes.io/name": "flotilla-agent"}); err != nil {
			t.Fatal(err)
		}
		var running, states []string
		for _, p := range pods.Items {
			states = append(states, fmt.Sprintf("%s node=%q phase=%s deleting=%v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil))
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running = append(running, p.Spec.NodeName)
			}
		}
		slices.Sort(running)
		if len(pods.Items) == len(wantNodes) && slices.Equal(running, wantNodes) {
			return
		}
		last = strings.Join(states, "; ")
		time.Sleep(250 * time.Millisecond)
	}
	var events corev1.EventList
	_ = cl.List(t.Context(), &events, client.InNamespace(bootstrap.DefaultNamespace))
	var msgs []string
	for _, e := range events.Items {
		msgs = append(msgs, e.InvolvedObject.Name+": "+e.Reason+": "+e.Message)
	}
	t.Fatalf("agent pods not Running on exactly %v: %s\nevents:\n%s", wantNodes, last, strings.Join(msgs, "\n"))
}
