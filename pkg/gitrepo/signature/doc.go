// Package signature owns commit signatures: the keys that make them and the
// keys that are trusted to, with no Git transport (pkg/gitrepo signs and
// reads commits through it).
//
// ParseSigningKey makes a Signer from an OpenPGP or SSH private key;
// KeyRing (ParseKeyRing, LoadKeyRing) holds trusted OpenPGP and SSH public
// keys, and KeyRing.Verify checks a signature over a commit's payload
// (ErrUnsigned, ErrUntrustedSigner, ErrBadSignature). SSH signatures are
// git's gpg.format=ssh format (SSHSIG, namespace "git").
package signature
