// Package testkeys makes the commit signing keys tests need (SSH ed25519
// and RSA, OpenPGP), each with its signer, its private half as the git CLI
// and signature.ParseSigningKey take it, and its public half as a
// trusted-keys file holds it. Keys are made fresh (or from a seed, where a
// test must make the same key twice) and never written to the repository.
package testkeys
