package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/agent/apply"
)

// KubeDiscovery asks the API server (aggregated discovery: a few requests
// per call).
type KubeDiscovery struct {
	dc discovery.CachedDiscoveryInterfaceWithContext
}

// NewKubeDiscovery builds a Discovery with a discovery client of its own
// for cfg; the agent shares one through NewKubeDiscoveryWithClient.
func NewKubeDiscovery(cfg *rest.Config) (*KubeDiscovery, error) {
	c, err := apply.NewClients(cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return NewKubeDiscoveryWithClient(c.Discovery), nil
}

// NewKubeDiscoveryWithClient builds a Discovery on dc, the discovery client
// of apply.Clients (its HTTP client bounds each request).
func NewKubeDiscoveryWithClient(dc discovery.CachedDiscoveryInterfaceWithContext) *KubeDiscovery {
	return &KubeDiscovery{dc: dc}
}

// Discover returns the server version and served group/versions and kinds.
// A partial failure (an aggregated API that is down) still returns what
// the other groups serve.
func (d *KubeDiscovery) Discover(ctx context.Context) (ClusterInfo, error) {
	if err := ctx.Err(); err != nil {
		return ClusterInfo{}, err
	}
	// dc is a cache shared with others: drop it so that the call reports
	// the APIs served now (a unit may have added CRDs since the last).
	d.dc.InvalidateWithContext(ctx)
	v, err := d.dc.ServerVersionWithContext(ctx)
	if err != nil {
		return ClusterInfo{}, fmt.Errorf("discover server version: %w", err)
	}
	info := ClusterInfo{KubeVersion: v.GitVersion, Namespaced: map[schema.GroupKind]bool{}}
	_, lists, err := discovery.ServerGroupsAndResourcesWithContext(ctx, d.dc)
	var partial *discovery.ErrGroupDiscoveryFailed
	if err != nil && !(errors.As(err, &partial) && len(lists) > 0) {
		return ClusterInfo{}, fmt.Errorf("discover APIs: %w", err)
	}
	seenGV := map[string]bool{}
	seenRes := map[string]bool{}
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		if !seenGV[l.GroupVersion] {
			seenGV[l.GroupVersion] = true
			info.GroupVersions = append(info.GroupVersions, l.GroupVersion)
		}
		for _, r := range l.APIResources {
			if r.Kind == "" || containsSlash(r.Name) { // subresources
				continue
			}
			info.Namespaced[schema.GroupKind{Group: gv.Group, Kind: r.Kind}] = r.Namespaced
			k := gv.String() + "/" + r.Kind
			if !seenRes[k] {
				seenRes[k] = true
				info.Resources = append(info.Resources, k)
			}
		}
	}
	sort.Strings(info.GroupVersions)
	sort.Strings(info.Resources)
	return info, nil
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}
