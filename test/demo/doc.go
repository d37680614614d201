// Package demo owns `make demo`: a local fleet made of real parts — a Git
// smart-HTTP server, three clusters (member1, member2, edge-1: etcd,
// kube-apiserver, controllers, kwok nodes and Volcano) and one
// flotilla-agent process per cluster — started from the fleet repo
// template, run until the fleet is in sync, and torn down without leaving a
// process behind. The same scenario runs as TestDemo.
package demo
