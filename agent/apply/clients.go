package apply

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// DiscoveryTimeout bounds each discovery request of Clients.Discovery
// (less when the rest.Config's Timeout is shorter).
const DiscoveryTimeout = 30 * time.Second

// Clients is the API access to one cluster, built once per process and
// handed to everything that talks to the cluster (the Applier, the Volcano
// manager, discovery for Helm), so that they share one HTTP transport (one
// connection pool, one request counter) and one REST mapper instead of
// each discovering the cluster on its own.
type Clients struct {
	// Config is the configuration the clients were built from; read-only.
	Config *rest.Config
	// HTTPClient is rest.HTTPClientFor(Config), under every client here.
	HTTPClient *http.Client
	// Mapper is controller-runtime's dynamic mapper: it re-discovers a
	// group when a kind is missing, which a unit that creates CRDs before
	// their resources relies on.
	Mapper meta.RESTMapper
	// Client reads and writes through Mapper.
	Client client.Client
	// Discovery caches discovery answers in memory until it is
	// invalidated; each user invalidates it when it needs fresh answers.
	Discovery discovery.CachedDiscoveryInterfaceWithContext
}

// NewClients builds the Clients for cfg (wrap cfg with a WriteCounter
// first to count requests). scheme is the typed objects Client knows;
// client-go's when nil.
func NewClients(cfg *rest.Config, scheme *runtime.Scheme) (*Clients, error) {
	if scheme == nil {
		scheme = clientgoscheme.Scheme
	}
	cfg = rest.CopyConfig(cfg)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("rest mapper: %w", err)
	}
	c, err := client.New(cfg, client.Options{HTTPClient: httpClient, Mapper: mapper, Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	// client-go's discovery requests take their deadline from the HTTP
	// client's Timeout; a copy of the client bounds them and still shares
	// the transport.
	discHTTP := *httpClient
	if discHTTP.Timeout == 0 || discHTTP.Timeout > DiscoveryTimeout {
		discHTTP.Timeout = DiscoveryTimeout
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, &discHTTP)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return &Clients{
		Config:     cfg,
		HTTPClient: httpClient,
		Mapper:     mapper,
		Client:     c,
		Discovery:  memory.NewMemCacheClientWithContext(dc),
	}, nil
}
