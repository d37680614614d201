package health

import (
	"context"
	"strings"
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

var widgetCheck = slice.HealthCheck{APIVersion: "example.com/v1", Kind: "Widget",
	Current: "status.phase == 'Ready'", InProgress: "status.phase == 'Pending'", Failed: "status.phase == 'Broken'"}

func object(apiVersion, kind string, generation int64, st map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": "x", "namespace": "ns", "generation": generation},
	}}
	if st != nil {
		u.Object["status"] = st
	}
	return u
}

func TestStatus(t *testing.T) {
	checks, err := Compile([]slice.HealthCheck{widgetCheck, {APIVersion: "batch.volcano.sh/v1alpha1", Current: "status.state.phase == 'Completed'"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		want kstatus.Status
	}{
		{"current by its check", object("example.com/v1", "Widget", 1, map[string]any{"phase": "Ready"}), kstatus.CurrentStatus},
		{"failed by its check", object("example.com/v1", "Widget", 1, map[string]any{"phase": "Broken"}), kstatus.FailedStatus},
		{"in progress by its check", object("example.com/v1", "Widget", 1, map[string]any{"phase": "Pending"}), kstatus.InProgressStatus},
		{"no expression true is in progress", object("example.com/v1", "Widget", 1, map[string]any{"phase": "Other"}), kstatus.InProgressStatus},
		{"observedGeneration behind is in progress", object("example.com/v1", "Widget", 2, map[string]any{"phase": "Ready", "observedGeneration": int64(1)}), kstatus.InProgressStatus},
		{"a group's check covers its kinds", object("batch.volcano.sh/v1alpha1", "Job", 1, map[string]any{"state": map[string]any{"phase": "Completed"}}), kstatus.CurrentStatus},
		{"other kinds by kstatus", object("example.com/v1", "Gadget", 1, map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": "False", "reason": "Broken", "message": "no"}}}), kstatus.InProgressStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := checks.Status(context.Background(), tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.want {
				t.Fatalf("status %s, want %s", res.Status, tt.want)
			}
		})
	}
	// Nil checks: kstatus for every kind (a Widget without conditions is Current).
	var none *Checks
	if res, err := none.Status(context.Background(), object("example.com/v1", "Widget", 1, map[string]any{"phase": "Broken"})); err != nil || res.Status != kstatus.CurrentStatus {
		t.Fatalf("nil checks: %+v, %v", res, err)
	}
}

func TestCompileRejects(t *testing.T) {
	tests := []struct {
		name   string
		checks []slice.HealthCheck
		want   string
	}{
		{"current does not compile", []slice.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.phase =="}}, "healthChecks[0].current"},
		{"failed does not compile", []slice.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget", Current: "true", Failed: "(("}}, "healthChecks[0].failed"},
		{"current missing", []slice.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget"}}, "healthChecks[0].current: empty expression"},
		{"two checks for a kind", []slice.HealthCheck{widgetCheck, widgetCheck}, "healthChecks[1]: a second check for Widget.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.checks)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile: %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCompileIsMemoised(t *testing.T) {
	a, err := Compile([]slice.HealthCheck{widgetCheck})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Compile([]slice.HealthCheck{widgetCheck})
	if a != b {
		t.Fatal("the same checks compiled twice")
	}
	if c, err := Compile(nil); c != nil || err != nil {
		t.Fatalf("no checks: %v, %v", c, err)
	}
}

func FuzzCompile(f *testing.F) {
	f.Add("example.com/v1", "Widget", "status.phase == 'Ready'", "", "status.phase == 'Broken'")
	f.Add("v1", "", "has(status.x)", "true", "((")
	f.Fuzz(func(t *testing.T, apiVersion, kind, current, inProgress, failed string) {
		checks, err := Compile([]slice.HealthCheck{{APIVersion: apiVersion, Kind: kind, Current: current, InProgress: inProgress, Failed: failed}})
		if err != nil {
			return
		}
		// Compiled checks evaluate any object without panicking.
		_, _ = checks.Status(context.Background(), object(apiVersion, kind, 1, map[string]any{"phase": "Ready"}))
	})
}
