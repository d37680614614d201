package testenv

import (
	"context"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kwokStall outlasts kube-controller-manager's default node monitor grace
// period (50s) plus its monitor period (5s): what a kwok process starved of
// CPU on a busy machine looks like to the node lifecycle controller.
const kwokStall = 70 * time.Second

// TestKwokStarvationKeepsPodsReady: a kwok that sends no node heartbeat for
// longer than the default grace period must not take Ready pods away. With
// the default, the node lifecycle controller marks the nodes NotReady,
// taints them and sets every pod on them Ready=False; kwok makes the node
// Ready again but never a Running pod, so a Deployment stays unavailable
// for good and a test waiting for it times out (issue 30's TestPlanEqualsApply
// under load). The test cluster's controller manager tolerates a stall.
func TestKwokStarvationKeepsPodsReady(t *testing.T) {
	if testing.Short() {
		t.Skip("stalls kwok for over a minute")
	}
	t.Parallel()
	c := StartCluster(t, ClusterOptions{Mode: Full})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const ns = "starve"
	if err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/web:1"}}},
			},
		},
	}
	if err := c.client.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	available := func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(dep), &d); err != nil {
			return false, nil
		}
		return d.Status.AvailableReplicas == 2, nil
	}
	if err := poll(ctx, "Deployment web available", available); err != nil {
		t.Fatalf("%v\n%s", err, c.Describe(ctx))
	}

	kwok := c.proc(Kwok)
	if kwok == nil || kwok.cmd.Process == nil {
		t.Fatal("kwok is not running")
	}
	if err := kwok.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Logf("kwok stopped for %s", kwokStall)
	select {
	case <-time.After(kwokStall):
	case <-ctx.Done():
	}
	if err := kwok.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	// Every pod kept Ready through the stall, and the Deployment is still
	// available; the nodes carry no taint of an unreachable node.
	var pods corev1.PodList
	if err := c.client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if r := podCondition(p, corev1.PodReady); r == nil || r.Status != corev1.ConditionTrue {
			t.Errorf("pod %s lost Ready during the stall: %+v", p.Name, r)
		}
	}
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeUnreachable || taint.Key == corev1.TaintNodeNotReady {
				t.Errorf("node %s tainted %s after the stall", n.Name, taint.Key)
			}
		}
	}
	if ok, err := available(ctx); !ok || err != nil {
		t.Errorf("Deployment web not available after the stall: %v", err)
	}
	if t.Failed() {
		t.Logf("after the stall:\n%s", c.Describe(ctx))
	}
}
