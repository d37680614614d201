// Package gitrepo owns every Git operation of Flotilla and is the only
// package that imports go-git. Every network call takes a context and is
// bounded by a timeout (DefaultTimeout unless configured).
//
// Reading the fleet repo (agent):
//
//	src := &gitrepo.Source{URL: url, Branch: "main", Auth: auth, CacheDir: dir}
//	res, err := src.Sync(ctx)     // ls-remote; fetch (depth 1, one branch) only on a new head
//	last, ok := src.LastGood()    // previous checkout, also after a restart, offline
//	old, err := src.Checkout(ctx, hash) // an older commit of the branch, fetched if needed
//
// Sync returns a Result with Revision ("main@sha1:<hash>"), Hash and Dir, an
// immutable directory holding the commit's tree. errors.Is(err,
// ErrUnreachable) tells an outage from ErrAuth, ErrRepoNotFound and
// ErrRefNotFound. A fetch larger than MaxFetchSize (DefaultMaxFetchSize,
// 512 MiB, when zero) is aborted as it streams to disk, with ErrTooLarge; the
// last good checkout stays. The cache under CacheDir survives restarts and
// is cloned again when damaged; a checkout whose content no longer matches
// the digest recorded when it was exported is exported again, never used. Trees are written through go-billy's BoundOS
// filesystem with every entry name checked (go-git CVE-2023-49569).
// Source.Commit and Source.CommitsBetween give the commits to verify.
//
// Over HTTP(S) the Source speaks Git protocol v2 when the server does
// (probed once; Source.Protocol forces v2 or v0): a poll is one ls-refs of
// the one ref followed, a fetch one v2 fetch of the wanted commit with the
// cached head as "have", so neither carries the advertisement of the
// repository's other refs (status refs, other clusters' slices). SSH, and
// servers without v2, get go-git's v0 transport (protov2.go).
//
// Slice refs (slices.go): CutSlices writes, for each cluster, a commit on
// SliceRef(cluster) whose tree is a main commit's tree pruned to the
// cluster's paths, plus the proof (that commit's raw object and main's raw
// trees along the pruned paths); PublishSlices pushes them in one push. A
// Source with Ref set follows one: it checks the proof by recomputing
// hashes (ErrBadSlice when the slice is not part of the main commit it
// names), stores the main commit, and reports it as the Result's Hash, so
// that signature verification and status see main's commit.
//
// Writing status (agent):
//
//	w := gitrepo.NewWriter(url, gitrepo.PushOptions{Auth: auth, MaxHistory: 50, Signer: signer})
//	res, err := w.PushFiles(ctx, "refs/heads/flotilla/status/member1",
//		map[string][]byte{"status.yaml": doc}, "status", gitrepo.Signature{Name: "member1", Email: "…"})
//
// PushFiles commits on top of the ref's remote head and pushes that ref
// only; a lost race is retried on the new head with Backoff; a refusal is
// ErrRejected; MaxHistory squashes the ref into one root commit (the only
// force push, guarded by a lease on the head it replaces).
//
// Reading status (hub): ReadRefs lists every ref under a prefix with its
// head commit, the paths that commit changed and one file's content, from
// a URL (fetching only changed refs) or a local repository.
//
// Local repositories (flotilla plan): ResolveRevision, ExportTree,
// ChangedFiles, ReadCommit; ListTree (paths and blob hashes, no content),
// BlobHash and ExportTreePaths (part of a tree) let plan leave a large
// generated directory unexported.
//
// External sources (hub, hub/gitsource): ResolveRef resolves a branch or
// tag of a remote with one ls-remote (peeling annotated tags); FetchTree
// fetches one commit (depth 1, into a temporary store) and writes one
// subtree of it, after checking the whole subtree against TreeLimits and
// for unsafe names, symlinks leaving it and submodules; DirTreeHash gives
// the Git tree hash of a directory on disk, so a vendored copy is checked
// against its commit without the network.
//
// Credentials: Auth, from a mounted Secret with LoadAuth (Flux's keys:
// username, password, bearerToken, identity, known_hosts, ca.crt). Auth
// never prints secrets, and URLs are redacted in errors.
//
// Signatures are pkg/gitrepo/signature's job (keys and the signature
// formats, no Git transport): PushOptions.Signer signs the commits a push
// makes, and Commit.Verify checks a commit against a signature.KeyRing.
//
// Backoff is the exponential backoff with jitter used between push
// attempts, exported for the agent's retries.
package gitrepo
