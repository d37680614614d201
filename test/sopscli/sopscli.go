package sopscli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/flotilla-gitops/flotilla/pkg/render/sopsdecrypt"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// Path is bin/sops, or an error wrapping testenv.ErrToolMissing.
func Path() (string, error) { return testenv.ToolPath("sops") }

// Require fails t when bin/sops is missing, or skips it under -short
// (unit tests in `make test-unit` run without tools).
func Require(t testing.TB) {
	t.Helper()
	testenv.RequireTool(t, "sops")
}

// Key is an age key made for one test.
type Key struct {
	// File is the identity file content (SOPS_AGE_KEY, the agent's Secret).
	File       []byte
	Recipient  string
	Identities []age.Identity
}

// NewKey makes an age key.
func NewKey(t testing.TB) Key {
	t.Helper()
	file, recipient, err := sopsdecrypt.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ids, err := sopsdecrypt.ParseIdentities(file)
	if err != nil {
		t.Fatal(err)
	}
	return Key{File: file, Recipient: recipient, Identities: ids}
}

// Options tune one encryption.
type Options struct {
	// EncryptedRegex is sops' --encrypted-regex (e.g. "^(data|stringData)$").
	EncryptedRegex string
	// MACOnlyEncrypted is sops' --mac-only-encrypted.
	MACOnlyEncrypted bool
	// InputType is sops' --input-type/--output-type (yaml, json, dotenv,
	// binary); empty lets sops choose by the file name, as users run it.
	InputType string
}

// Encrypt writes plaintext to a file called name in a temporary directory
// and returns what `sops --encrypt --age R1,R2` prints for it. The sops
// process runs with an empty HOME and no SOPS_* environment, so nothing of
// the developer's configuration takes part.
func Encrypt(t testing.TB, name string, plaintext []byte, opts Options, recipients ...string) []byte {
	t.Helper()
	bin, dir, in := input(t, name, plaintext)
	args := []string{"--encrypt", "--age", strings.Join(recipients, ",")}
	if opts.EncryptedRegex != "" {
		args = append(args, "--encrypted-regex", opts.EncryptedRegex)
	}
	if opts.MACOnlyEncrypted {
		args = append(args, "--mac-only-encrypted")
	}
	if opts.InputType != "" {
		args = append(args, "--input-type", opts.InputType, "--output-type", opts.InputType)
	}
	args = append(args, in)
	return run(t, dir, bin, nil, args...)
}

// Decrypt is `sops --decrypt` of an encrypted document with the age
// identity file content key (SOPS_AGE_KEY), for tests that compare the
// agent's plaintext with sops' own.
func Decrypt(t testing.TB, name string, encrypted, key []byte, inputType string) []byte {
	t.Helper()
	bin, dir, in := input(t, name, encrypted)
	args := []string{"--decrypt"}
	if inputType != "" {
		args = append(args, "--input-type", inputType, "--output-type", inputType)
	}
	return run(t, dir, bin, []string{"SOPS_AGE_KEY=" + string(key)}, append(args, in)...)
}

// UpdateKeys is `sops updatekeys --yes` of an encrypted document under a
// .sops.yaml whose one creation rule names recipients, run with the age
// identity file content key (SOPS_AGE_KEY), which must decrypt the
// document's data key; it returns the re-keyed document.
func UpdateKeys(t testing.TB, name string, encrypted, key []byte, recipients ...string) []byte {
	t.Helper()
	bin, dir, in := input(t, name, encrypted)
	config := filepath.Join(dir, ".sops.yaml")
	if err := os.WriteFile(config, []byte("creation_rules:\n  - age: "+strings.Join(recipients, ",")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, dir, bin, []string{"SOPS_AGE_KEY=" + string(key)}, "--config", config, "updatekeys", "--yes", in)
	out, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Run runs bin/sops with args in dir, as a user's shell there would, with
// env (e.g. SOPS_AGE_KEY_FILE=…) added to the same hermetic environment
// as Encrypt's, and returns its standard output.
func Run(t testing.TB, dir string, env []string, args ...string) []byte {
	t.Helper()
	bin, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	// Not dir: nothing of a user's configuration under HOME takes part.
	env = append([]string{"HOME=" + t.TempDir()}, env...)
	return run(t, dir, bin, env, args...)
}

// input writes data to a file called name in a new temporary directory.
func input(t testing.TB, name string, data []byte) (bin, dir, file string) {
	t.Helper()
	bin, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	file = filepath.Join(dir, name)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return bin, dir, file
}

func run(t testing.TB, dir, bin string, env []string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "SOPS_DISABLE_VERSION_CHECK=1"}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sops %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}
