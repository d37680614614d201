package apply

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Error classes, matched with errors.Is.
var (
	// ErrInvalid: the request itself is wrong (bad unit name, an object
	// without kind or name, duplicates, a namespaced object without a
	// namespace, an unknown kind). Nothing was applied.
	ErrInvalid = errors.New("invalid unit")
	// ErrEmpty: the unit rendered no objects and does not allow that.
	// Nothing was applied or pruned.
	ErrEmpty = errors.New("unit has no objects and allowEmpty is not set")
	// ErrApply: a dry-run or apply of an object failed.
	ErrApply = errors.New("apply failed")
	// ErrImmutable: the apply changes an immutable field (also ErrApply).
	ErrImmutable = errors.New("immutable field changed")
	// ErrPrune: deleting a stale object failed; it stays in the inventory.
	ErrPrune = errors.New("prune failed")
	// ErrHealthTimeout: objects were not Ready within the unit's timeout.
	ErrHealthTimeout = errors.New("health check timed out")
	// ErrHealthFailed: an object reached a terminal failed status.
	ErrHealthFailed = errors.New("health check failed")
	// ErrWaitInterrupted: the health wait ended early because
	// HealthOptions.Interrupt closed (a newer revision supersedes it).
	// What was applied stays applied, with its inventory.
	ErrWaitInterrupted = errors.New("health wait interrupted")
	// ErrInventory: the inventory ConfigMap could not be read or written,
	// or is corrupt.
	ErrInventory = errors.New("inventory")
	// ErrNoInventory: the unit was never applied in this cluster.
	ErrNoInventory = errors.New("unit has no inventory")
	// ErrHook: a Helm hook of the unit failed or did not finish; the
	// message names the hook and its Job's (or Pod's) reason.
	ErrHook = errors.New("helm hook")
)

// failureOf gives an Apply error its condition reason and whether it
// stalls. The order is the precedence when several object errors are
// joined: a conflict is retried every cycle (Git, or the other unit
// letting go, resolves it); hooks run once per revision of the unit; an
// invalid or empty unit waits for Git; failed requests and health are
// retried.
func failureOf(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrConflict):
		return status.Retrying(status.ReasonConflict, err)
	case errors.Is(err, ErrHook):
		return status.Stalling(status.ReasonHookFailed, err)
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrEmpty):
		return status.Stalling(status.ReasonApplyFailed, err)
	case errors.Is(err, ErrApply), errors.Is(err, ErrInventory):
		return status.Retrying(status.ReasonApplyFailed, err)
	case errors.Is(err, ErrPrune):
		return status.Retrying(status.ReasonPruneFailed, err)
	case errors.Is(err, ErrHealthTimeout), errors.Is(err, ErrHealthFailed), errors.Is(err, ErrWaitInterrupted):
		return status.Retrying(status.ReasonHealthCheckFailed, err)
	}
	return status.Retrying(status.ReasonApplyFailed, err)
}

// ObjectError is a failure concerning one object. Its message never
// contains Secret data.
type ObjectError struct {
	// Op is what failed: "dry-run", "apply", "delete", "read", "health".
	Op        string
	Group     string
	Kind      string
	Namespace string
	Name      string
	// Class is one of the Err* sentinels above.
	Class error
	// Cause is the underlying error; for Secrets, API status errors are
	// replaced by a masked copy, so apierrors.IsInvalid etc. still work.
	Cause error
}

// Subject formats the object as Kind/namespace/name (Kind/name when
// cluster-scoped), like ssa change sets.
func (e *ObjectError) Subject() string {
	return subject(e.Kind, e.Namespace, e.Name)
}

func (e *ObjectError) Error() string {
	msg := fmt.Sprintf("%s %s", e.Subject(), e.Op)
	if e.Class != nil {
		msg += ": " + e.Class.Error()
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap exposes the class (and ErrApply for ErrImmutable) and the cause.
func (e *ObjectError) Unwrap() []error {
	errs := []error{e.Class}
	if errors.Is(e.Class, ErrImmutable) {
		errs = append(errs, ErrApply)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

func subject(kind, namespace, name string) string {
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}

// objectError builds an ObjectError for obj, classifying API errors and
// masking Secret data out of the cause.
func objectError(op string, class error, obj *unstructured.Unstructured, cause error) *ObjectError {
	gvk := obj.GroupVersionKind()
	if errors.Is(class, ErrApply) && isImmutable(cause) {
		class = ErrImmutable
	}
	if isSecret(obj) {
		cause = maskSecretError(cause, obj)
	}
	return &ObjectError{
		Op: op, Group: gvk.Group, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Class: class, Cause: cause,
	}
}

// isImmutable recognises the API server's immutable-field rejection. The
// API offers no reason code for it, only Invalid with a message, so the
// message of each cause is inspected (as kubectl and Flux do).
func isImmutable(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || !apierrors.IsInvalid(err) {
		return false
	}
	st := se.Status()
	if strings.Contains(st.Message, "immutable") {
		return true
	}
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if strings.Contains(c.Message, "immutable") {
				return true
			}
		}
	}
	return false
}

func isSecret(obj *unstructured.Unstructured) bool {
	return obj.GetKind() == "Secret" && obj.GetAPIVersion() == "v1"
}

// minMaskable is the shortest secret value that is masked in place
// (redact.Values' bound); with a shorter one the API message is dropped
// entirely, since masking two letters everywhere would garble it and
// leaving them is not safe.
const minMaskable = 4

// maskSecretError returns err with every data/stringData value of secret
// (as given, base64-decoded, and Go-quoted) masked. API status errors keep
// their type, reason, code and cause fields so they still classify.
func maskSecretError(err error, secret *unstructured.Unstructured) error {
	if err == nil {
		return nil
	}
	values, dropAll := secretValues(secret)
	maskFn := func(s string) string {
		if dropAll {
			return "(message withheld: it may quote Secret data)"
		}
		return redact.Values(s, values)
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		masked := st
		masked.Message = maskFn(st.Message)
		if st.Details != nil {
			d := *st.Details
			d.Causes = make([]metav1.StatusCause, len(st.Details.Causes))
			for i, c := range st.Details.Causes {
				c.Message = maskFn(c.Message)
				c.Field = maskFn(c.Field)
				d.Causes[i] = c
			}
			masked.Details = &d
		}
		return &apierrors.StatusError{ErrStatus: masked}
	}
	return maskedError{msg: maskFn(err.Error()), cause: unwrapNonStatus(err)}
}

// maskedError replaces a non-API error's text; it keeps context errors
// reachable so cancellation still classifies.
type maskedError struct {
	msg   string
	cause error
}

func (e maskedError) Error() string { return e.msg }
func (e maskedError) Unwrap() error { return e.cause }

// unwrapNonStatus keeps only well-known sentinel causes (context errors)
// whose text cannot carry object data.
func unwrapNonStatus(err error) error {
	for _, s := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// secretValues lists the strings to mask (redact.Values masks the longest
// first). dropAll is set when a value is too short to mask safely.
func secretValues(secret *unstructured.Unstructured) (values []string, dropAll bool) {
	seen := map[string]bool{}
	add := func(v string) {
		if v == "" || seen[v] {
			return
		}
		if len(v) < minMaskable {
			dropAll = true
			return
		}
		seen[v] = true
		values = append(values, v)
		if q := strconv.Quote(v); q[1:len(q)-1] != v {
			values = append(values, q[1:len(q)-1])
		}
	}
	for _, field := range []string{"data", "stringData"} {
		m, ok := secret.Object[field]
		if !ok {
			continue
		}
		walkLeaves(m, func(leaf string) {
			add(leaf)
			if field == "data" {
				if dec, err := base64.StdEncoding.DecodeString(leaf); err == nil {
					add(string(dec))
				}
			} else {
				add(base64.StdEncoding.EncodeToString([]byte(leaf)))
			}
		})
	}
	return values, dropAll
}

// walkLeaves calls fn with the string form of every scalar under v; Secret
// data is a map of strings, but an invalid Secret may hold anything and the
// API server may quote it back.
func walkLeaves(v any, fn func(string)) {
	switch t := v.(type) {
	case map[string]any:
		for _, x := range t {
			walkLeaves(x, fn)
		}
	case []any:
		for _, x := range t {
			walkLeaves(x, fn)
		}
	case string:
		fn(t)
	case nil:
	default:
		fn(fmt.Sprint(t))
	}
}
