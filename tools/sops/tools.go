//go:build tools

// Package sops pins the sops CLI the SOPS tests encrypt fixtures with. It
// links every KMS SDK sops supports; that is fine for a test tool, which is
// its own module: the agent decrypts with sops' age key source only.
package sops

import _ "github.com/getsops/sops/v3/cmd/sops"
