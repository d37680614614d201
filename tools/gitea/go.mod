module github.com/flotilla-gitops/flotilla/tools/gitea

go 1.26.0

// Gitea is built inside a copy of its own module (tools/build.sh
// build_gitea), whose go.mod has replace directives that a requiring module
// would ignore; this file pins the version and keys the cache.
require code.gitea.io/gitea v1.26.0
