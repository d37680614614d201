// Keeps tools/ out of the flotilla module. Each tool group below is its own
// module (tools/etcd, tools/kube, tools/kwok, tools/volcano) because their
// dependency graphs conflict; tools/build.sh builds them into bin/.
module github.com/flotilla-gitops/flotilla/tools

go 1.26.0
