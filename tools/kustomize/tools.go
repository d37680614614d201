//go:build tools

// Package kustomize pins the kustomize CLI (`kustomize build`, what
// `kubectl kustomize` runs) that tests compare renders with: the release
// built on the same sigs.k8s.io/kustomize/api version as the root module.
package kustomize

import _ "sigs.k8s.io/kustomize/kustomize/v5"
