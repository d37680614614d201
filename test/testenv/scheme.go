package testenv

import (
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	busv1alpha1 "volcano.sh/apis/pkg/apis/bus/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

var (
	schemeOnce sync.Once
	scheme     *runtime.Scheme
)

// Scheme returns the scheme of Cluster.Client: the client-go types,
// apiextensions/v1 and Volcano's batch/v1alpha1, scheduling/v1beta1 and
// bus/v1alpha1. Callers must not modify it; build their own for more types.
func Scheme() *runtime.Scheme {
	schemeOnce.Do(func() {
		s := runtime.NewScheme()
		for _, add := range []func(*runtime.Scheme) error{
			clientgoscheme.AddToScheme,
			apiextensionsv1.AddToScheme,
			batchv1alpha1.AddToScheme,
			schedulingv1beta1.AddToScheme,
			busv1alpha1.AddToScheme,
		} {
			// These registrations are static; failing would be a build defect.
			if err := add(s); err != nil {
				panic(err)
			}
		}
		scheme = s
	})
	return scheme
}
