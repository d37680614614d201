// Package gitserver runs a real Git smart-HTTP server for tests and demos:
// the system's `git http-backend` behind net/http/cgi on 127.0.0.1, serving
// bare repositories from a directory, with HTTP basic-auth users and a
// pre-receive hook that enforces per-user ref rules the way a forge's branch
// protection does (for example: "maintainer" may fast-forward main, nobody
// force-pushes main, "agent-member1" may only push, and force-push,
// refs/heads/flotilla/status/member1).
//
// Nothing here fakes Git: clients talk the real protocol to real git
// processes, so a rejected push is rejected by receive-pack itself.
//
// Usage in a test:
//
//	srv := gitserver.Start(t, gitserver.ForgeConfig("member1", "member2"))
//	url := srv.MustCreateRepo(t, "fleet", "testdata/fleet")
//	hash := srv.Commit(t, "fleet", gitserver.Maintainer, map[string]string{"a.yaml": "x: 1\n"}, nil, "edit a")
//	before := srv.Stats("fleet")
//	// ... exercise a client with url and srv.Password(user) ...
//	after := srv.Stats("fleet").Sub(before) // assert e.g. after.UploadPacks == 0
//
// Outside tests (the demo command), New returns a Server that lives until
// Close or until its context is done.
//
// Behaviour worth knowing:
//   - The server speaks Git protocol v2 to clients that ask for it with the
//     Git-Protocol header (as GitHub and GitLab do) and v0/v1 to the others;
//     Config.ProtocolV0Only drops the header, like an old forge. Requests
//     map one-to-one onto operations: a v0 ls-remote is one GET of
//     info/refs, a fetch adds one POST of git-upload-pack; a v2 ls-refs is
//     one POST of git-upload-pack (Stats.LsRefs), a v2 fetch another
//     (Stats.UploadPacks); a push is a GET of
//     info/refs?service=git-receive-pack plus one POST of git-receive-pack.
//     Stats counts exactly these. SSH stays v0.
//   - Every request needs valid credentials unless Config.AnonymousRead is
//     set, which lets unauthenticated clients fetch (never push).
//   - Rules are data (Rule): a user with no matching rule cannot push at all.
//     Ref patterns are shell `case` globs, where `*` also matches `/`.
//     A rule without Force allows only fast-forward updates (no deletes).
//   - Stop and Start simulate an outage: the listener goes away and comes
//     back on the same address, existing connections are cut.
//   - SetDelay slows every request down, to exercise client timeouts.
//   - AddToken accepts "Authorization: Bearer <token>" for a user.
//   - Config.SSH also serves Git over SSH (SSHURL, KnownHosts, AddSSHKey):
//     the key identifies the user, whatever the login name, and the same
//     hook rules apply. SSH requests are not counted in Stats.
//   - Push and Commit drive the git CLI (clone --depth 1, edit, commit,
//     push) with the user's credentials, so the hook judges them like any
//     client; ErrPushRejected carries the hook's message.
package gitserver
