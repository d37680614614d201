//go:build tools

// Package etcd pins the etcd server that backs every test kube-apiserver.
// The blank import keeps its dependencies in go.mod and go.sum; build.sh
// builds it with `go build`.
package etcd

import (
	_ "go.etcd.io/etcd/server/v3"
)
