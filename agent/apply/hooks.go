package apply

// Helm hooks: run around a unit's apply in Helm's phases, once per unit
// hash, and remembered in the inventory.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Hook is a Helm hook of the unit (render.Hook): an object run in the
// phases its Events name instead of being applied with the unit.
type Hook struct {
	Object *unstructured.Unstructured
	// Events as Helm names them: pre-install, pre-upgrade, post-install,
	// post-upgrade run; delete and rollback hooks never do (a unit is
	// neither uninstalled nor rolled back by Helm).
	Events []string
	// Weight orders hooks of one phase (lowest first; ties keep the
	// order given).
	Weight int
	// DeletePolicies: before-hook-creation, hook-succeeded, hook-failed.
	DeletePolicies []string
}

// Hook events and delete policies, as Helm spells them.
const (
	HookPreInstall     = "pre-install"
	HookPreUpgrade     = "pre-upgrade"
	HookPostInstall    = "post-install"
	HookPostUpgrade    = "post-upgrade"
	HookBeforeCreation = "before-hook-creation"
	HookSucceeded      = "hook-succeeded"
	HookFailed         = "hook-failed"
)

// HookRun is the inventory's record of the unit's hooks at one unit hash,
// so they run once per revision of the unit, not on every apply.
type HookRun struct {
	// Hash is the unit hash the hooks ran for; empty when none ran.
	Hash string
	// Install: the unit had never been applied (install hooks), otherwise
	// upgrade hooks.
	Install bool
	// State: hookPre (pre hooks done, post hooks due once the unit is
	// Ready), hookDone, hookFailedPre or hookFailedPost.
	State string
	// Message says which hook failed and why.
	Message string
}

// Inventory ConfigMap keys of a HookRun: "<hash> install|upgrade <state>"
// and the failure message.
const (
	keyHooks        = "hooks"
	keyHooksMessage = "hooks-message"
)

const (
	hookPre        = "pre"
	hookDone       = "done"
	hookFailedPre  = "failed-pre"
	hookFailedPost = "failed-post"
)

// pending: the post hooks of this hash have not run, or a hook failed
// (each apply at this hash reports it again).
func (r HookRun) pending(hash string) bool {
	return r.Hash != "" && r.Hash == hash && r.State != hookDone
}

func (r HookRun) err() error {
	return fmt.Errorf("%w: %s", ErrHook, r.Message)
}

// preHooks runs the pre-install or pre-upgrade hooks of a unit hash not
// run before (install when the unit was never applied) and records the
// outcome in the inventory. A pre hook that failed at this hash fails
// again without running. The returned inventory is prev, updated.
func (a *Applier) preHooks(ctx context.Context, u UnitRequest, prev *Inventory) (*Inventory, error) {
	rec := prev.Hooks
	if len(u.Hooks) == 0 || u.Hash == "" {
		if rec == (HookRun{}) {
			return prev, nil
		}
		next := prev.clone()
		next.Hooks = HookRun{}
		return next, a.storeInventory(ctx, next)
	}
	if rec.Hash == u.Hash {
		if rec.State == hookFailedPre {
			return prev, rec.err()
		}
		return prev, nil
	}
	install := prev.Hash == ""
	event := HookPreUpgrade
	if install {
		event = HookPreInstall
	}
	next := prev.clone()
	next.Hooks = HookRun{Hash: u.Hash, Install: install, State: hookPre}
	runErr := a.runHooks(ctx, u, event)
	if runErr != nil && ctx.Err() != nil {
		// Interrupted (the agent stops): not a verdict on the hook; the
		// next apply runs it again.
		return prev, runErr
	}
	if runErr != nil {
		next.Hooks.State, next.Hooks.Message = hookFailedPre, runErr.Error()
	}
	if err := a.storeInventory(ctx, next); err != nil {
		return prev, errors.Join(runErr, err)
	}
	if runErr != nil {
		return next, next.Hooks.err()
	}
	return next, nil
}

// postHooks runs the post-install or post-upgrade hooks once the unit is
// Ready at the hash its pre hooks ran for; a post hook that failed at this
// hash fails again without running.
func (a *Applier) postHooks(ctx context.Context, u UnitRequest, res *UnitResult) error {
	inv, err := a.loadInventory(ctx, u.Name)
	if err != nil {
		return err
	}
	rec := inv.Hooks
	if !rec.pending(u.Hash) || rec.State == hookFailedPre {
		return nil
	}
	if rec.State == hookFailedPost {
		return rec.err()
	}
	if !res.Ready {
		return nil // the next apply runs them
	}
	event := HookPostUpgrade
	if rec.Install {
		event = HookPostInstall
	}
	next := inv.clone()
	next.Hooks.State = hookDone
	runErr := a.runHooks(ctx, u, event)
	if runErr != nil && ctx.Err() != nil {
		return runErr // interrupted: run again by the next apply
	}
	if runErr != nil {
		next.Hooks.State, next.Hooks.Message = hookFailedPost, runErr.Error()
	}
	if err := a.storeInventory(ctx, next); err != nil {
		return errors.Join(runErr, err)
	}
	if runErr != nil {
		return next.Hooks.err()
	}
	return nil
}

// runHooks runs the unit's hooks for event in order, each to completion;
// the first failure stops the phase.
func (a *Applier) runHooks(ctx context.Context, u UnitRequest, event string) error {
	var hooks []Hook
	for _, h := range u.Hooks {
		if slices.Contains(h.Events, event) {
			hooks = append(hooks, h)
		}
	}
	slices.SortStableFunc(hooks, func(x, y Hook) int { return x.Weight - y.Weight })
	if len(hooks) == 0 {
		return nil
	}
	ds := make([]*desired, len(hooks))
	for i, h := range hooks {
		// One by one: prepare sorts what it is given; hooks keep their order.
		d, err := prepare(u.Name, []*unstructured.Unstructured{h.Object}, a.client.RESTMapper())
		if err != nil {
			return fmt.Errorf("%s hook: %w", event, err)
		}
		ds[i] = d[0]
	}
	deadline := time.Now().Add(a.timeout(u.Timeout))
	// As Helm: a hook-succeeded hook is deleted only once every hook of
	// the event has run (a later hook may need an earlier one, such as a
	// Job its ServiceAccount), newest first; when one fails, the ones
	// before it that succeeded are deleted and the failed one by its
	// hook-failed policy.
	for i, h := range hooks {
		stop := a.reportWaiting(ctx, []target{{id: ds[i].id, gvk: ds[i].obj.GroupVersionKind()}}, u.Health.Checks, hookWaiting(u.Waiting, event))
		failure, err := a.runHook(ctx, ds[i], h, event, deadline)
		stop()
		if err != nil {
			return err
		}
		if failure != "" {
			for j := i - 1; j >= 0; j-- {
				if err := a.deleteHook(ctx, ds[j], hooks[j], event, HookSucceeded); err != nil {
					return err
				}
			}
			if err := a.deleteHook(ctx, ds[i], h, event, HookFailed); err != nil {
				return err
			}
			return fmt.Errorf("%s hook %s failed: %s", event, ds[i].subject(), failure)
		}
	}
	for i := len(hooks) - 1; i >= 0; i-- {
		if err := a.deleteHook(ctx, ds[i], hooks[i], event, HookSucceeded); err != nil {
			return err
		}
	}
	return nil
}

// hookWaiting says which event's hook the unit waits for.
func hookWaiting(report func([]string), event string) func([]string) {
	if report == nil {
		return nil
	}
	return func(notReady []string) {
		out := make([]string, len(notReady))
		for i, s := range notReady {
			out[i] = event + " hook " + s
		}
		report(out)
	}
}

// runHook creates one hook (deleting its previous run first under
// before-hook-creation) and waits for a Job or Pod to finish; failure is
// the reason it failed.
func (a *Applier) runHook(ctx context.Context, d *desired, h Hook, event string, deadline time.Time) (failure string, err error) {
	name := fmt.Sprintf("%s hook %s", event, d.subject())
	if slices.Contains(h.DeletePolicies, HookBeforeCreation) {
		if err := a.recreate(ctx, d); err != nil {
			return "", fmt.Errorf("%s: delete the previous run: %w", name, objectError("delete", ErrApply, d.obj, err))
		}
	}
	if _, _, err := a.apply(ctx, d); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	failure, err = a.waitHook(ctx, d, deadline)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return failure, nil
}

// deleteHook deletes a hook that ran when its delete policies name policy.
func (a *Applier) deleteHook(ctx context.Context, d *desired, h Hook, event, policy string) error {
	if !slices.Contains(h.DeletePolicies, policy) {
		return nil
	}
	if err := a.recreate(ctx, d); err != nil {
		return fmt.Errorf("%s hook %s: delete (%s): %w", event, d.subject(), policy, objectError("delete", ErrApply, d.obj, err))
	}
	return nil
}

// waitHook waits, as Helm does, for a Job to complete or fail and for a
// Pod to succeed or fail; other kinds are done once created. It returns
// the failure's reason, or an error when the hook did not finish by
// deadline.
func (a *Applier) waitHook(ctx context.Context, d *desired, deadline time.Time) (string, error) {
	kind := d.id.GroupKind
	isJob := kind.Group == "batch" && kind.Kind == "Job"
	isPod := kind.Group == "" && kind.Kind == "Pod"
	if !isJob && !isPod {
		return "", nil
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var failure string
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(d.obj.GroupVersionKind())
	err := wait.PollUntilContextCancel(wctx, a.opts.PollInterval, true, func(ctx context.Context) (bool, error) {
		rctx, cancel := a.reqCtx(ctx)
		defer cancel()
		if err := a.client.Get(rctx, client.ObjectKey{Namespace: d.id.Namespace, Name: d.id.Name}, live); err != nil {
			if apierrors.IsNotFound(err) {
				return false, errors.New("deleted while running")
			}
			return false, nil // transient: poll again
		}
		var done bool
		if isJob {
			done, failure = jobOutcome(live)
		} else {
			done, failure = podOutcome(live)
		}
		return done, nil
	})
	if err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			return "", fmt.Errorf("%w: not finished within the unit's timeout", ErrHealthTimeout)
		}
		return "", err
	}
	return failure, nil
}

// jobOutcome reads a Job's Complete and Failed conditions.
func jobOutcome(job *unstructured.Unstructured) (done bool, failure string) {
	conds, _, _ := unstructured.NestedSlice(job.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["status"] != string(metav1.ConditionTrue) {
			continue
		}
		switch m["type"] {
		case "Complete":
			return true, ""
		case "Failed":
			return true, reasonMessage(m["reason"], m["message"], "Job failed")
		}
	}
	return false, ""
}

// podOutcome reads a Pod's phase.
func podOutcome(pod *unstructured.Unstructured) (done bool, failure string) {
	phase, _, _ := unstructured.NestedString(pod.Object, "status", "phase")
	switch phase {
	case "Succeeded":
		return true, ""
	case "Failed":
		reason, _, _ := unstructured.NestedString(pod.Object, "status", "reason")
		msg, _, _ := unstructured.NestedString(pod.Object, "status", "message")
		return true, reasonMessage(reason, msg, "Pod failed")
	}
	return false, ""
}

func reasonMessage(reason, message any, fallback string) string {
	parts := []string{}
	for _, p := range []any{reason, message} {
		if s, _ := p.(string); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return fallback
	}
	return strings.Join(parts, ": ")
}
