package apply

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-gitops/flotilla/pkg/status"
)

func secretObj(data, stringData map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "creds", "namespace": "apps"}}}
	if data != nil {
		u.Object["data"] = data
	}
	if stringData != nil {
		u.Object["stringData"] = stringData
	}
	return u
}

func TestObjectErrorMasksSecretData(t *testing.T) {
	const marker = "hunter2-MARKER"
	enc := base64.StdEncoding.EncodeToString([]byte(marker))
	tests := []struct {
		name   string
		secret *unstructured.Unstructured
		cause  error
		leaks  []string
	}{
		{
			name:   "invalid status quoting stringData",
			secret: secretObj(nil, map[string]any{"password": marker}),
			cause: apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "creds", field.ErrorList{
				field.Invalid(field.NewPath("data").Key("password"), marker, "bad value "+marker),
			}),
			leaks: []string{marker, enc},
		},
		{
			name:   "base64 data quoted decoded and encoded",
			secret: secretObj(map[string]any{"password": enc}, nil),
			cause:  apierrors.NewBadRequest(fmt.Sprintf("decoded %s encoded %s", marker, enc)),
			leaks:  []string{marker, enc},
		},
		{
			name:   "nested garbage in data as SSA echoes it",
			secret: secretObj(map[string]any{"k": map[string]any{"nested": marker, "n": int64(987654321)}}, nil),
			cause:  apierrors.NewBadRequest(`.data.k: expected string, got &value.valueUnstructured{Value:map[string]interface {}{"n":987654321, "nested":"` + marker + `"}}`),
			leaks:  []string{marker, "987654321"},
		},
		{
			name:   "plain error",
			secret: secretObj(nil, map[string]any{"token": marker}),
			cause:  errors.New("transport: " + marker),
			leaks:  []string{marker},
		},
		{
			name:   "short value withholds the message",
			secret: secretObj(nil, map[string]any{"pin": "42", "token": marker}),
			cause:  apierrors.NewBadRequest("pin 42 token " + marker),
			leaks:  []string{marker, "42"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := objectError("apply", ErrApply, tt.secret, tt.cause)
			msg := err.Error()
			for _, l := range tt.leaks {
				if strings.Contains(msg, l) {
					t.Fatalf("error leaks %q: %s", l, msg)
				}
			}
			if !strings.Contains(msg, "Secret/apps/creds apply") {
				t.Fatalf("error does not name the object: %s", msg)
			}
			if !errors.Is(err, ErrApply) {
				t.Fatal("not ErrApply")
			}
			if apierrors.ReasonForError(err) != apierrors.ReasonForError(tt.cause) {
				t.Fatalf("reason lost: %v", apierrors.ReasonForError(err))
			}
			var se apierrors.APIStatus
			if errors.As(err, &se) {
				full := fmt.Sprintf("%+v", se.Status())
				for _, l := range tt.leaks {
					if strings.Contains(full, l) {
						t.Fatalf("status details leak %q: %s", l, full)
					}
				}
			}
		})
	}
}

func TestObjectErrorKeepsOtherObjectsCause(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cfg", "namespace": "apps"}, "data": map[string]any{"k": "visible"}}}
	cause := apierrors.NewBadRequest("value visible rejected")
	err := objectError("dry-run", ErrApply, cm, cause)
	if !strings.Contains(err.Error(), "visible") || !errors.Is(err, cause) {
		t.Fatalf("a ConfigMap's cause should pass through unchanged: %v", err)
	}
}

func TestIsImmutable(t *testing.T) {
	gk := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"selector immutable", apierrors.NewInvalid(gk, "web", field.ErrorList{field.Invalid(field.NewPath("spec", "selector"), "x", "field is immutable")}), true},
		{"other invalid", apierrors.NewInvalid(gk, "web", field.ErrorList{field.Required(field.NewPath("spec", "template"), "")}), false},
		{"conflict", apierrors.NewConflict(schema.GroupResource{Resource: "deployments"}, "web", errors.New("immutable")), false},
		{"plain", errors.New("field is immutable"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isImmutable(tt.err); got != tt.want {
				t.Fatalf("isImmutable = %v, want %v", got, tt.want)
			}
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web", "namespace": "a"}}}
			err := objectError("dry-run", ErrApply, obj, tt.err)
			if errors.Is(err, ErrImmutable) != tt.want || !errors.Is(err, ErrApply) {
				t.Fatalf("classes: immutable=%v apply=%v", errors.Is(err, ErrImmutable), errors.Is(err, ErrApply))
			}
			var oe *ObjectError
			if !errors.As(err, &oe) || oe.Kind != "Deployment" || oe.Namespace != "a" || oe.Name != "web" {
				t.Fatalf("ObjectError fields: %+v", oe)
			}
		})
	}
}

func TestStatusReasonSurvivesMasking(t *testing.T) {
	cause := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid, Message: "x secret-value-1234"}}
	err := objectError("apply", ErrApply, secretObj(nil, map[string]any{"a": "secret-value-1234"}), cause)
	if !apierrors.IsInvalid(err) || strings.Contains(err.Error(), "secret-value-1234") {
		t.Fatalf("got %v", err)
	}
}

func TestFailureReasons(t *testing.T) {
	conflict := &ObjectError{Op: "apply", Class: ErrConflict, Kind: "ConfigMap", Name: "c"}
	tests := []struct {
		err     error
		reason  string
		stalled bool
	}{
		{fmt.Errorf("unit x: %w", ErrInvalid), status.ReasonApplyFailed, true},
		{fmt.Errorf("unit x: %w", ErrEmpty), status.ReasonApplyFailed, true},
		{&ObjectError{Op: "apply", Class: ErrApply, Kind: "ConfigMap", Name: "c"}, status.ReasonApplyFailed, false},
		{fmt.Errorf("unit x: %w", ErrInventory), status.ReasonApplyFailed, false},
		{fmt.Errorf("unit x: %w", ErrPrune), status.ReasonPruneFailed, false},
		{fmt.Errorf("unit x: %w", ErrHealthTimeout), status.ReasonHealthCheckFailed, false},
		{fmt.Errorf("unit x: %w", ErrHealthFailed), status.ReasonHealthCheckFailed, false},
		// An apply failure wins over a prune failure in the same error.
		{errors.Join(ErrPrune, ErrApply), status.ReasonApplyFailed, false},
		// A conflict joined with other object errors is still retried as one.
		{errors.Join(&ObjectError{Op: "apply", Class: ErrApply, Kind: "Secret", Name: "s"}, conflict), status.ReasonConflict, false},
		{errors.New("something else"), status.ReasonApplyFailed, false},
		// A hook runs once per revision: only a new one can fix it, even a
		// hook that timed out or failed to apply.
		{fmt.Errorf("unit x: %w: %w", ErrHook, ErrHealthTimeout), status.ReasonHookFailed, true},
		{fmt.Errorf("unit x: %w: %w", ErrHook, &ObjectError{Op: "apply", Class: ErrApply, Kind: "Job", Name: "j"}), status.ReasonHookFailed, true},
	}
	for _, tc := range tests {
		err := failureOf(tc.err)
		f, ok := errors.AsType[*status.Failure](err)
		if !ok || f.Reason != tc.reason || f.Stalled != tc.stalled {
			t.Errorf("failureOf(%v) = %#v; want %s, stalled %v", tc.err, f, tc.reason, tc.stalled)
			continue
		}
		if !errors.Is(err, tc.err) || err.Error() != tc.err.Error() {
			t.Errorf("failureOf(%v) lost the error: %v", tc.err, err)
		}
	}
	if failureOf(nil) != nil {
		t.Error("failureOf(nil) is not nil")
	}
}

// TestFailureDetail: a Failed object's message carries the reason and
// message of the condition that says why, once.
func TestFailureDetail(t *testing.T) {
	obj := func(conds ...map[string]any) *unstructured.Unstructured {
		list := make([]any, len(conds))
		for i, c := range conds {
			list[i] = c
		}
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": list}}}
	}
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		said string
		want string
	}{
		{"job past its deadline",
			obj(map[string]any{"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"}),
			"Job Failed. failed: 0/1", " (DeadlineExceeded: Job was active longer than specified deadline)"},
		{"deployment past its progress deadline, message already said",
			obj(map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet \"web\" has timed out progressing."}),
			"ProgressDeadlineExceeded: ReplicaSet \"web\" has timed out progressing.", ""},
		{"reason only", obj(map[string]any{"type": "Stalled", "status": "True", "reason": "BadSpec"}), "", " (BadSpec)"},
		{"no failure condition", obj(map[string]any{"type": "Ready", "status": "True"}), "", ""},
		{"no conditions", &unstructured.Unstructured{Object: map[string]any{}}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := failureDetail(tt.obj, tt.said); got != tt.want {
				t.Fatalf("failureDetail = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	if got := Summarize([]string{"a", "b"}); got != "a; b" {
		t.Errorf("Summarize: %q", got)
	}
	if got := Summarize(strings.Split("a b c d e f g", " ")); got != "a; b; c; d; e; and 2 more" {
		t.Errorf("Summarize: %q", got)
	}
}
