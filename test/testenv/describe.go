package testenv

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// describeLimit bounds the pods Describe lists.
const describeLimit = 40

// Describe is what a failing test prints about the cluster besides the
// component logs: every node's Ready condition, heartbeat and taints, and
// the pods that are not Ready with why. A test that waits on workloads
// fails for the agent's reasons or the cluster's; this tells them apart
// (a node that missed its heartbeats is tainted and its pods marked not
// Ready by the node lifecycle controller).
func (c *Cluster) Describe(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "===== cluster %s at %s =====\n", c.Name, time.Now().UTC().Format(time.RFC3339))
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes); err != nil {
		fmt.Fprintf(&b, "list nodes: %v\n", err)
	}
	for _, n := range nodes.Items {
		fmt.Fprintf(&b, "node %s: %s", n.Name, nodeReadyText(n))
		for _, t := range n.Spec.Taints {
			fmt.Fprintf(&b, " taint=%s:%s", t.Key, t.Effect)
		}
		b.WriteByte('\n')
	}
	var pods corev1.PodList
	if err := c.client.List(ctx, &pods, client.Limit(2000)); err != nil {
		fmt.Fprintf(&b, "list pods: %v\n", err)
	}
	shown := 0
	for _, p := range pods.Items {
		ready := podCondition(p, corev1.PodReady)
		if ready != nil && ready.Status == corev1.ConditionTrue || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		if shown++; shown > describeLimit {
			continue
		}
		fmt.Fprintf(&b, "pod %s/%s not Ready: phase=%s node=%q", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName)
		if ready != nil {
			fmt.Fprintf(&b, " ready=%s reason=%q message=%q since=%s", ready.Status, ready.Reason, ready.Message, ready.LastTransitionTime.UTC().Format(time.RFC3339))
		}
		if s := podCondition(p, corev1.PodScheduled); s != nil && s.Status != corev1.ConditionTrue {
			fmt.Fprintf(&b, " unscheduled=%q", s.Message)
		}
		b.WriteByte('\n')
	}
	if shown > describeLimit {
		fmt.Fprintf(&b, "and %d more pods not Ready\n", shown-describeLimit)
	}
	return b.String()
}

func nodeReadyText(n corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return fmt.Sprintf("Ready=%s reason=%q heartbeat=%s transition=%s", c.Status, c.Reason,
				c.LastHeartbeatTime.UTC().Format(time.RFC3339), c.LastTransitionTime.UTC().Format(time.RFC3339))
		}
	}
	return "no Ready condition"
}

func podCondition(p corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
