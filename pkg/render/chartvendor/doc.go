// Package chartvendor pulls chart-repository charts into the fleet repo's
// charts/<chart>/<version>/, pinned in charts/charts.lock.yaml, so agents
// render from Git alone and later hub runs reuse the pins offline. Charts
// come from HTTP chart repositories (index.yaml) or from OCI registries
// (oci://, through Helm's registry client, with credentials from Helm's or
// Docker's registry config or RegistryOptions, never written anywhere).
//
// Only the hub links it (through hub/fleetrender): it downloads over HTTP, which
// no agent does. It lives under pkg/render because Helm is imported only in
// that tree; its errors are pkg/render's *Error classified by the ErrChart*
// sentinels.
package chartvendor
