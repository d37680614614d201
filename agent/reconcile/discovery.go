package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// discoveryTimeout bounds each discovery request.
const discoveryTimeout = 30 * time.Second

// KubeDiscovery asks the API server (aggregated discovery: a few requests
// per call).
type KubeDiscovery struct {
	dc discovery.DiscoveryInterface
}

// NewKubeDiscovery builds a Discovery for the cluster of cfg.
func NewKubeDiscovery(cfg *rest.Config) (*KubeDiscovery, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.Timeout == 0 || cfg.Timeout > discoveryTimeout {
		// client-go's discovery takes no context; the client timeout bounds it.
		cfg.Timeout = discoveryTimeout
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return &KubeDiscovery{dc: dc}, nil
}

// Discover returns the server version and served group/versions and kinds.
// A partial failure (an aggregated API that is down) still returns what
// the other groups serve.
func (d *KubeDiscovery) Discover(ctx context.Context) (ClusterInfo, error) {
	if err := ctx.Err(); err != nil {
		return ClusterInfo{}, err
	}
	v, err := d.dc.ServerVersion()
	if err != nil {
		return ClusterInfo{}, fmt.Errorf("discover server version: %w", err)
	}
	info := ClusterInfo{KubeVersion: v.GitVersion}
	_, lists, err := d.dc.ServerGroupsAndResources()
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
