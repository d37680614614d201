// Package sopsdecrypt reads SOPS-encrypted documents (YAML, JSON, dotenv and
// binary files) for the render step: it recognises them, decrypts them with
// age identities and verifies their MAC (the agent), or redacts them into
// documents of the same shape whose encrypted values are replaced by a
// marker derived from the ciphertext (the hub, which has no key).
//
// # Why not sops' own decrypt package
//
// Every sops package that knows the document tree (sops, aes, stores, decrypt,
// keyservice) imports the AWS, GCP, Azure and Vault SDKs through keyservice,
// which would multiply the agent binary. So this package re-implements the
// small, stable part of the format the agent needs — the ordered tree each
// sops store loads, the ENC[AES256_GCM,…] value encoding and the MAC over
// the values in document order — and uses sops' own age key source
// (github.com/getsops/sops/v3/age, which imports no cloud SDK) to recover
// the data key. The tests decrypt files written by the real sops CLI.
//
// # Decisions
//
//   - A value is decrypted when it is an ENC[AES256_GCM,…] string, whatever
//     the document's unencrypted_suffix/encrypted_regex rules say. That is
//     safe because the MAC (itself encrypted with the data key) covers the
//     plaintext of every value in order, or of every encrypted one with
//     mac_only_encrypted: no value can be changed, added or dropped without
//     the data key; at most an encrypted value can be replaced by its own
//     plaintext, which changes nothing. Comments are ignored (sops leaves
//     them out of the MAC), so files using the comment regexes decrypt
//     their values; comments are dropped from the output, never decrypted.
//   - Only age recipients are used; a file with no age recipient, or with
//     Shamir key groups, fails with ErrUnsupported.
//   - INI files are not recognised (krusty has no INI input).
//   - Errors name keys and recipients (public), never values, MACs or keys.
package sopsdecrypt
