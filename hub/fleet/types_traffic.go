package fleet

// KindTrafficRoute is a canary or A/B route: routes/<name>.yaml.
const KindTrafficRoute = "TrafficRoute"

// RoutesDir holds the TrafficRoutes.
const RoutesDir = "routes"

// TrafficRoute splits and steers HTTP traffic to a Service's versions on
// the clusters of its destination. hub/traffic renders it to an Istio
// VirtualService and DestinationRule; field names follow Istio's so its
// users recognise them.
type TrafficRoute struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta       `json:"metadata"`
	Spec     TrafficRouteSpec `json:"spec"`
	Source   Source           `json:"-"`
	// Lines locates every field, for problems found after loading.
	Lines FieldLines `json:"-"`
}

// TrafficRouteSpec is one Service's routing.
type TrafficRouteSpec struct {
	// Destination chooses the clusters that get the route.
	Destination Destination `json:"destination"`
	// Namespace of the Service and of the generated Istio objects.
	Namespace string `json:"namespace"`
	// Host is the Service the route sends traffic to (a short name such
	// as frontend-web, or a FQDN); its subsets are declared below.
	Host string `json:"host"`
	// Hosts are the VirtualService's hosts: where clients send traffic.
	// Default: [Host].
	Hosts []string `json:"hosts,omitempty"`
	// Gateways bind the route to Istio gateways ([<namespace>/]<name>, or
	// mesh for sidecars). Default: the mesh only.
	Gateways []string `json:"gateways,omitempty"`
	// Subsets name versions of the Service by pod labels (a
	// DestinationRule's subsets).
	Subsets []RouteSubset `json:"subsets"`
	// HTTP routes are tried in order; the first whose match fits a request
	// handles it.
	HTTP []HTTPRoute `json:"http"`
}

// RouteSubset is a version of the Service: the pods with these labels.
type RouteSubset struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// HTTPRoute sends matching requests to weighted subsets.
type HTTPRoute struct {
	Name string `json:"name,omitempty"`
	// Match conditions are ORed; the fields of one condition are ANDed.
	// None matches every request.
	Match []HTTPMatch `json:"match,omitempty"`
	// Route lists the subsets and their weights, which sum to 100. A
	// single destination may leave its weight out.
	Route []RouteDestination `json:"route"`
	// Headers are changed on the way to (request) and from (response)
	// the destination.
	Headers *HeaderOperations `json:"headers,omitempty"`
}

// HTTPMatch selects requests.
type HTTPMatch struct {
	URI *StringMatch `json:"uri,omitempty"`
	// Headers by lower-case name.
	Headers     map[string]StringMatch `json:"headers,omitempty"`
	QueryParams map[string]StringMatch `json:"queryParams,omitempty"`
}

// StringMatch has exactly one of Exact, Prefix and Regex (RE2 syntax).
type StringMatch struct {
	Exact  string `json:"exact,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Regex  string `json:"regex,omitempty"`
}

// RouteDestination is a subset of the route's Service and its weight.
type RouteDestination struct {
	Subset string `json:"subset"`
	// Port is the Service port, needed when the Service has several.
	Port int32 `json:"port,omitempty"`
	// Weight is the percentage of the route's traffic (0–100).
	Weight *int32 `json:"weight,omitempty"`
}

// HeaderOperations change request and response headers.
type HeaderOperations struct {
	Request  *HeaderChanges `json:"request,omitempty"`
	Response *HeaderChanges `json:"response,omitempty"`
}

// HeaderChanges set (replace), add (append) and remove headers.
type HeaderChanges struct {
	Set    map[string]string `json:"set,omitempty"`
	Add    map[string]string `json:"add,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}
