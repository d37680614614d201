// Package bootstrap owns getting a fleet started: creating a fleet repo
// from the template (Init), registering a cluster in it (Register:
// clusters/<name>.yaml, validated by hub/fleet) and producing that
// cluster's agent install manifests (Install*): the Kustomize base of
// manifests/ with a generated overlay that wires in the cluster name, the
// fleet repo URL and branch, the credential Secret and the image — the
// equivalent of `flux bootstrap`, with nothing reaching the cluster from
// the hub.
//
// The template and the manifests are the ones embedded in the binary by
// the module root package (see flotilla.FleetRepoTemplate and
// flotilla.Manifests); options can substitute others (tests).
//
// Settings are the agent flags an install sets, so that a local run (the
// demo) uses exactly what the DaemonSet's ConfigMap holds.
package bootstrap
