//go:build tools

// Package kube pins the Kubernetes control-plane binaries that the tests run.
// The blank imports keep their dependencies in go.mod and go.sum; build.sh
// builds them with `go build`.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
