// Package sopscli runs the real sops CLI (built into bin/ by `make tools`
// from the pin in tools/sops) for tests: it encrypts fixtures for age
// recipients exactly as a user's `sops --encrypt` would, so the agent's
// decryptor is tested against sops' own output, never against files it
// wrote itself.
package sopscli
