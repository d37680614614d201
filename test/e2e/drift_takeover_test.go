package e2e_test

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
)

// imperativeUnit is a Service with one unnamed port and a Deployment on
// kwok nodes: the shapes whose list keys kubectl edits change.
func imperativeUnit(ns string) handUnit {
	return handUnit{name: "web", files: map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ns.yaml\n  - svc.yaml\n  - deploy.yaml\n",
		"ns.yaml":            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n",
		"svc.yaml": `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: ` + ns + `
spec:
  selector: {app: web}
  ports:
    - port: 80
`,
		"deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: ` + ns + `
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx:1.27
          ports:
            - containerPort: 80
          resources:
            requests: {cpu: 5m}
`,
	}}
}

// TestAgentRestoresImperativeDrift: changes made the way kubectl makes
// them — a JSON patch changing a Service port (a list key), a container
// renamed, an env var and a port added by an edit, a scale through the
// scale subresource — are each undone by the next cycles, and the unit
// stays Ready (issue 22: the port patch used to fail every apply).
func TestAgentRestoresImperativeDrift(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	srv := newGitServer(t)
	const cluster, ns = "takeover", "takeover-app"
	dir := t.TempDir()
	writeHandSlice(t, dir, cluster, []handUnit{imperativeUnit(ns)})
	repo := fleetrepo.New(t, srv, "fleet", dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo, interval: 2 * time.Second})
	a.start()
	a.waitApplied(2*time.Minute, repo.Head())

	key := client.ObjectKey{Namespace: ns, Name: "web"}
	deployment := func() (*appsv1.Deployment, error) {
		d := &appsv1.Deployment{}
		return d, k.Get(testCtx(t), key, d)
	}
	deploymentAsInGit := func() (bool, string) {
		d, err := deployment()
		if err != nil {
			return false, err.Error()
		}
		cs := d.Spec.Template.Spec.Containers
		ok := d.Spec.Replicas != nil && *d.Spec.Replicas == 2 && len(cs) == 1 && cs[0].Name == "web" &&
			len(cs[0].Env) == 0 && len(cs[0].Ports) == 1 && cs[0].Ports[0].ContainerPort == 80
		return ok, fmt.Sprintf("replicas %v containers %+v", d.Spec.Replicas, cs)
	}
	jsonPatch := func(obj client.Object, body string) error {
		obj.SetNamespace(ns)
		obj.SetName("web")
		return k.Patch(testCtx(t), obj, client.RawPatch(types.JSONPatchType, []byte(body)), client.FieldOwner("kubectl-patch"))
	}

	tests := []struct {
		name     string
		edit     func() error
		restored func() (bool, string)
	}{
		{"kubectl patch of a Service port", func() error {
			return jsonPatch(&corev1.Service{}, `[{"op":"replace","path":"/spec/ports/0/port","value":8080}]`)
		}, func() (bool, string) {
			svc := &corev1.Service{}
			if err := k.Get(testCtx(t), key, svc); err != nil {
				return false, err.Error()
			}
			return len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].Port == 80, fmt.Sprintf("ports %+v", svc.Spec.Ports)
		}},
		{"kubectl patch renaming the container", func() error {
			return jsonPatch(&appsv1.Deployment{}, `[{"op":"replace","path":"/spec/template/spec/containers/0/name","value":"renamed"}]`)
		}, deploymentAsInGit},
		{"kubectl edit adding an env var and a port", func() error {
			d, err := deployment()
			if err != nil {
				return err
			}
			ctr := &d.Spec.Template.Spec.Containers[0]
			ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
			ctr.Ports = append(ctr.Ports, corev1.ContainerPort{ContainerPort: 9090, Protocol: corev1.ProtocolTCP})
			return k.Update(testCtx(t), d, client.FieldOwner("kubectl-edit"))
		}, deploymentAsInGit},
		{"kubectl scale", func() error {
			d := &appsv1.Deployment{}
			d.SetNamespace(ns)
			d.SetName("web")
			return k.SubResource("scale").Patch(testCtx(t), d, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":5}}`)), client.FieldOwner("kubectl"))
		}, deploymentAsInGit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited := time.Now()
			if err := tt.edit(); err != nil {
				t.Fatalf("edit: %v", err)
			}
			waitFor(t, 2*time.Minute, "the agent to restore what Git says", tt.restored)
			assertCorrectedByNextCycle(t, edited, a.logs.String)
			st := a.waitStatus(time.Minute, "the unit Ready after the correction", allUnitsReady)
			if st.LastError != "" {
				t.Fatalf("status after the correction:\n%s", describeStatus(st))
			}
		})
	}
}
