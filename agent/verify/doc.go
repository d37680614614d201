// Package verify owns which commits an agent may apply: it checks the
// OpenPGP or SSH signatures of the fetched branch head — and, in strict
// mode, of every commit since the last one it accepted — against trusted
// public keys mounted from a Secret.
//
// # Modes
//
//   - none: every commit of the configured branch is accepted (the loop
//     still refuses a revision from another branch).
//   - head: the head commit must carry a valid signature by a trusted key.
//   - strict: additionally, every commit between the anchor (the last
//     accepted commit) and the head (git rev-list anchor..head, merges
//     and the commits of merged branches included) must be signed by a
//     trusted key. The anchor is read from Config.Anchor (the agent's
//     state ConfigMap, agent/truststate) on every verification, so it survives
//     restarts, failover and an empty cache, and replicas share it. It
//     fails closed: with no anchor recorded, only a trust root named by
//     the operator (Config.TrustRoot, --verify-trust-root) starts the
//     chain — the commits after it must all be signed — else every head
//     is refused (no_anchor); an anchor that cannot be read or is corrupt
//     refuses (state_unavailable), trust root or not. If the head is not
//     a descendant of the anchor (history was rewritten), it is refused
//     until an operator resets the anchor.
//
// A merge made by a forge's web interface is signed by the forge's key
// (GitHub's "web-flow" key, for example): trust that key too, or merge
// locally with a signed merge commit.
//
// # Keys
//
// Config.KeysDir is a mounted Secret: every regular file holds armored
// OpenPGP public keys or SSH public keys (authorized_keys or git
// allowed_signers lines), see signature.ParseKeyRing. The directory is read
// again on every verification (parsed again only when its content
// changed), so updating the Secret rotates the keys without restarting
// the agent: a refused head is re-verified every cycle and is accepted as
// soon as a key that signed it is trusted. A directory that cannot be read
// or parsed, or holds no key, refuses every commit (reason
// keys_unavailable) — never the previous keys, which a rotation may have
// meant to revoke.
//
// # Refusals
//
// A refused commit is a *RefusedError (errors.Is(err, ErrRefused), and
// errors.Is with signature.ErrUnsigned, ErrUntrustedSigner, ErrBadSignature
// or ErrNotAncestor for the cause) whose Reason is one of the Reason*
// constants: the label of the agent's flotilla_verification_failures_total
// metric. Verify also returns the status.Verification for the cluster's
// status document in every case. Messages name commits and key
// fingerprints, never key material.
package verify
