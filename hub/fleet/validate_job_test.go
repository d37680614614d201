package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestGlobalJobReferences(t *testing.T) {
	job := func(queue, dependsOn string) string {
		return `apiVersion: flotilla.dev/v1alpha1
kind: GlobalJob
metadata:
  name: tf
spec:
  placement:
    type: BestFit
    destination: {fleet: prod}
  template:
    queue: ` + queue + `
    tasks:
      - name: ps
        replicas: 1
        template: {spec: {containers: [{name: c, image: x}]}}
      - name: worker
        replicas: 2
        dependsOn: {name: [` + dependsOn + `]}
        template: {spec: {containers: [{name: c, image: x}]}}
`
	}
	withQueue := `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: gpu
spec:
  clusters: [member1]
  queues: [{name: research-queue}]
`
	tests := []struct {
		name      string
		files     map[string]string
		wantErr   string
		wantWarn  string
		noWarning bool
	}{
		{name: "declared on every cluster", files: map[string]string{"jobs/tf.yaml": job("research-queue", "ps"), "fleets/gpu.yaml": strings.Replace(withQueue, "[member1]", "[member1, member2]", 1)}, noWarning: true},
		{name: "the default queue needs no declaration", files: map[string]string{"jobs/tf.yaml": job("default", "ps")}, noWarning: true},
		{name: "queue missing on one cluster", files: map[string]string{"jobs/tf.yaml": job("research-queue", "ps"), "fleets/gpu.yaml": withQueue},
			wantWarn: "spec.template.queue: selector matches no cluster: queue research-queue is not declared by any fleet of cluster member2"},
		{name: "dependsOn an unknown task", files: map[string]string{"jobs/tf.yaml": job("default", "chief")},
			wantErr: `spec.template.tasks[1].dependsOn.name[0]: reference to a missing object: no task named "chief" in this job`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeRepo(t, tt.files)
			r, err := Load(context.Background(), root)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrDanglingReference) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			var warns []string
			for _, w := range r.Warnings {
				warns = append(warns, w.Error())
			}
			got := strings.Join(warns, "\n")
			if tt.noWarning && got != "" {
				t.Fatalf("unexpected warnings: %s", got)
			}
			if !strings.Contains(got, tt.wantWarn) {
				t.Fatalf("warnings %q, want %q", got, tt.wantWarn)
			}
		})
	}
}
