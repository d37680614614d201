package testenv

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GPUResource is the extended resource fake GPU nodes advertise.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// kwok manages only nodes carrying this annotation, so tests may still create
// plain Node objects that stay NotReady.
const (
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
)

// NodeSpec describes one fake node that kwok keeps Ready. Empty resource
// fields take the defaults below.
type NodeSpec struct {
	Name   string
	CPU    string // quantity, default "32"
	Memory string // quantity, default "256Gi"
	Pods   int    // default 110
	GPUs   int    // nvidia.com/gpu capacity, default 0
	Labels map[string]string
	Taints []corev1.Taint
}

// Nodes returns count copies of tmpl named prefix-0 … prefix-(count-1).
func Nodes(prefix string, count int, tmpl NodeSpec) []NodeSpec {
	out := make([]NodeSpec, 0, count)
	for i := range count {
		n := tmpl
		n.Name = prefix + "-" + strconv.Itoa(i)
		n.Labels = maps.Clone(tmpl.Labels)
		n.Taints = append([]corev1.Taint(nil), tmpl.Taints...)
		out = append(out, n)
	}
	return out
}

// GPUNodes returns count nodes with gpusPerNode nvidia.com/gpu each, labelled
// nvidia.com/gpu.present=true as the NVIDIA GPU operator would.
func GPUNodes(prefix string, count, gpusPerNode int) []NodeSpec {
	return Nodes(prefix, count, NodeSpec{GPUs: gpusPerNode, Labels: map[string]string{"nvidia.com/gpu.present": "true"}})
}

// DefaultNodes is what a Full cluster gets when ClusterOptions.Nodes is nil.
func DefaultNodes() []NodeSpec {
	return Nodes("kwok-node", 2, NodeSpec{})
}

// nodeObject turns a spec into the Node kwok will adopt. Capacity goes into
// status at creation; kwok's node-initialize stage keeps what it finds there.
func (s NodeSpec) nodeObject() (*corev1.Node, error) {
	cpu, mem, pods := s.CPU, s.Memory, s.Pods
	if cpu == "" {
		cpu = "32"
	}
	if mem == "" {
		mem = "256Gi"
	}
	if pods == 0 {
		pods = 110
	}
	cpuQ, err := resource.ParseQuantity(cpu)
	if err != nil {
		return nil, fmt.Errorf("node %s cpu %q: %w", s.Name, cpu, err)
	}
	memQ, err := resource.ParseQuantity(mem)
	if err != nil {
		return nil, fmt.Errorf("node %s memory %q: %w", s.Name, mem, err)
	}
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    cpuQ,
		corev1.ResourceMemory: memQ,
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	if s.GPUs > 0 {
		resources[GPUResource] = *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)
	}
	labels := map[string]string{
		"type":                          "kwok",
		"kubernetes.io/hostname":        s.Name,
		"kubernetes.io/os":              "linux",
		"kubernetes.io/arch":            "amd64",
		"kubernetes.io/role":            "agent",
		"node-role.kubernetes.io/agent": "",
		"node.kubernetes.io/exclude-from-external-load-balancers": "",
	}
	maps.Copy(labels, s.Labels)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   s.Name,
			Labels: labels,
			Annotations: map[string]string{
				kwokNodeAnnotation:             kwokNodeValue,
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		Spec: corev1.NodeSpec{Taints: append([]corev1.Taint(nil), s.Taints...)},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources.DeepCopy(),
		},
	}, nil
}

// AddNodes creates fake nodes in a Full cluster and waits until they are
// schedulable: kwok reports them Ready and the node lifecycle controller has
// lifted the not-ready taint it puts on every new node.
func (c *Cluster) AddNodes(ctx context.Context, specs ...NodeSpec) error {
	if c.opts.Mode != Full {
		return fmt.Errorf("add nodes to %s: %w", c.Name, ErrNotFullMode)
	}
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		node, err := s.nodeObject()
		if err != nil {
			return err
		}
		if err := c.client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", s.Name, err)
		}
		names = append(names, s.Name)
	}
	return poll(ctx, "nodes Ready", func(ctx context.Context) (bool, error) {
		for _, name := range names {
			var node corev1.Node
			if err := c.client.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
				return false, nil
			}
			if !nodeReady(&node) || hasNotReadyTaint(&node) {
				return false, nil
			}
		}
		return true, nil
	}, c.kwokProc())
}

func hasNotReadyTaint(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return true
		}
	}
	return false
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
