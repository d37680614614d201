package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// VolcanoSchedulerName is the schedulerName that hands pods to vc-scheduler.
const VolcanoSchedulerName = "volcano"

// VolcanoDefaultQueue is the queue vc-scheduler creates at start-up.
const VolcanoDefaultQueue = "default"

func (c *Cluster) startVolcano(ctx context.Context, pt ports, watchCore func(...*process) []*process) error {
	t0 := time.Now()
	if err := c.applyCRDs(ctx, c.tools["volcano/crds"]); err != nil {
		return err
	}
	c.mark("volcano CRDs", t0)

	ctrl, err := c.launch(VolcanoControllers, "--kubeconfig="+c.AdminKubeconfig(),
		"--leader-elect=false",
		"--enable-healthz=true",
		"--healthz-address="+loopback(pt.vcControllers),
		"--scheduler-name="+VolcanoSchedulerName,
	)
	if err != nil {
		return err
	}
	sched, err := c.launch(VolcanoScheduler, "--kubeconfig="+c.AdminKubeconfig(),
		"--leader-elect=false",
		"--scheduler-conf="+c.tools["volcano/scheduler.conf"],
		"--scheduler-name="+VolcanoSchedulerName,
		"--enable-healthz=true",
		"--healthz-address="+loopback(pt.vcScheduler),
		"--listen-address="+loopback(pt.vcMetrics),
		// The cache dumper writes to /tmp on a signal; nothing here wants it.
		"--cache-dumper=false",
	)
	if err != nil {
		return err
	}
	watched := watchCore(ctrl, sched)
	for _, probe := range []struct {
		what string
		port int
	}{{VolcanoControllers + " /healthz", pt.vcControllers}, {VolcanoScheduler + " /healthz", pt.vcScheduler}} {
		url := "http://" + loopback(probe.port) + "/healthz"
		if err := poll(ctx, probe.what, httpProbe(url, nil, ""), watched...); err != nil {
			return err
		}
	}
	// vc-scheduler creates the default queue; vc-controller-manager's queue
	// controller opens it. Jobs in a queue that is not Open are not enqueued.
	err = poll(ctx, "Volcano queue "+VolcanoDefaultQueue+" Open", func(ctx context.Context) (bool, error) {
		var q schedulingv1beta1.Queue
		if err := c.client.Get(ctx, client.ObjectKey{Name: VolcanoDefaultQueue}, &q); err != nil {
			return false, nil
		}
		return q.Status.State == schedulingv1beta1.QueueStateOpen, nil
	}, watched...)
	if err != nil {
		return err
	}
	c.mark("volcano", t0)
	return nil
}

// ApplyCRDFiles creates the CustomResourceDefinitions found in the given YAML
// files (several documents per file allowed) and waits until each is
// Established. Existing CRDs are left as they are.
func (c *Cluster) ApplyCRDFiles(ctx context.Context, paths ...string) error {
	var all []*apiextensionsv1.CustomResourceDefinition
	for _, path := range paths {
		crds, err := readCRDs(path)
		if err != nil {
			return err
		}
		all = append(all, crds...)
	}
	return c.ApplyCRDs(ctx, all...)
}

// ApplyCRDs creates the CustomResourceDefinitions and waits until each is
// Established. Existing CRDs are left as they are.
func (c *Cluster) ApplyCRDs(ctx context.Context, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	names := make([]string, 0, len(crds))
	for _, crd := range crds {
		if err := c.client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	return poll(ctx, strconv.Itoa(len(names))+" CRDs Established", func(ctx context.Context) (bool, error) {
		for _, name := range names {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.client.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
				return false, nil
			}
			if !crdEstablished(&crd) {
				return false, nil
			}
		}
		return true, nil
	}, c.proc(KubeAPIServer))
}

func (c *Cluster) applyCRDs(ctx context.Context, dir string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return fmt.Errorf("list CRDs in %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return fmt.Errorf("no CRDs in %s: %w", dir, ErrToolMissing)
	}
	return c.ApplyCRDFiles(ctx, paths...)
}

func readCRDs(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open CRD file: %w", err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 64<<10)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		if crd.Name == "" { // empty document between separators
			continue
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: %s %q is not a CustomResourceDefinition", path, crd.Kind, crd.Name)
		}
		out = append(out, crd)
	}
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established {
			return cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
