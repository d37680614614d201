package cmd

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// AnnotationReconcileRequestedAt on the agent's ConfigMap
// (--reconcile-request-configmap) asks for a cycle now: every new value
// (kubectl annotate --overwrite with the current time, say) starts one, as
// Flux's reconcile.fluxcd.io/requestedAt does. It needs nothing but
// ConfigMap patch rights in the agent's namespace — no exec, no Git push.
const AnnotationReconcileRequestedAt = "flotilla.dev/reconcile-requested-at"

// defaultRequestConfigMap is the agent's settings ConfigMap, which every
// install (kustomize base, Helm chart, bootstrap) names so.
const defaultRequestConfigMap = "flotilla-agent-config"

// triggerer is the part of the loop a reconcile request reaches.
type triggerer interface{ Trigger() }

// watchReconcileRequests watches the ConfigMap name in namespace and
// triggers loop on every change of AnnotationReconcileRequestedAt, until
// ctx ends. The value present at start-up asks for nothing: the first
// cycle runs at once anyway. The informer re-lists and re-watches on its
// own after API server errors. A replica that does not lead keeps the
// request in the loop's one-slot trigger and runs it on taking over.
func watchReconcileRequests(ctx context.Context, cfg *rest.Config, namespace, name string, loop triggerer, log *slog.Logger) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", namespace, fields.OneTermEqualSelector("metadata.name", name))
	inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
	request := func(obj any) string {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			return cm.Annotations[AnnotationReconcileRequestedAt]
		}
		return ""
	}
	fire := func(value string) {
		log.Info("reconcile requested", "configmap", namespace+"/"+name, "requestedAt", value)
		loop.Trigger()
	}
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if v := request(obj); v != "" && !initial {
				fire(v)
			}
		},
		UpdateFunc: func(old, cur any) {
			if v := request(cur); v != "" && v != request(old) {
				fire(v)
			}
		},
	})
	if err != nil {
		return err
	}
	go inf.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			log.Info("watching reconcile requests", "configmap", namespace+"/"+name, "annotation", AnnotationReconcileRequestedAt)
		}
	}()
	return nil
}
