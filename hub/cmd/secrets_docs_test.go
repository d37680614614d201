package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/test/sopscli"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

const fleetRepoDocs = "../../docs/fleet-repo.md"

// docsShellBlocks are the ```sh blocks of a section of a Markdown file
// (from its "## title" heading to the next one), each as its lines.
func docsShellBlocks(t *testing.T, file, title string) [][]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "\n## "+title+"\n")
	if start < 0 {
		t.Fatalf("%s has no section %q", file, title)
	}
	section := doc[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var blocks [][]string
	var cur []string
	in := false
	for line := range strings.SplitSeq(section, "\n") {
		line = strings.TrimSpace(line) // blocks inside list items are indented
		switch {
		case !in && line == "```sh":
			in, cur = true, nil
		case in && line == "```":
			in = false
			blocks = append(blocks, cur)
		case in && line != "" && !strings.HasPrefix(line, "#"):
			cur = append(cur, line)
		}
	}
	return blocks
}

// blockWith is the first block with a line containing s.
func blockWith(t *testing.T, blocks [][]string, s string) []string {
	t.Helper()
	for _, b := range blocks {
		for _, line := range b {
			if strings.Contains(line, s) {
				return b
			}
		}
	}
	t.Fatalf("no shell block of the docs runs %q", s)
	return nil
}

var envAssignment = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=\S*$`)

// runDocsLine runs one documented shell line in the current directory as
// a shell would: leading NAME=value assignments are the command's
// environment, "> FILE" sends its output to FILE. flotilla runs in
// process, sops is the real CLI; anything else fails the test, so a
// command added to the docs is either run here or noticed. It returns
// the flotilla exit code (0 for sops, which fails the test itself).
func runDocsLine(t *testing.T, line string) (string, int) {
	t.Helper()
	if strings.ContainsAny(line, "$`|;&<'\"\\") {
		t.Fatalf("%q: shell syntax this test does not run", line)
	}
	args := strings.Fields(line)
	var env []string
	for len(args) > 0 && envAssignment.MatchString(args[0]) {
		env, args = append(env, args[0]), args[1:]
	}
	out := ""
	if i := len(args) - 2; i > 0 && args[i] == ">" {
		out, args = args[i+1], args[:i]
	}
	var stdout string
	code := ExitOK
	switch {
	case len(args) > 0 && args[0] == "flotilla" && len(env) == 0:
		var stderr string
		stdout, stderr, code = planCLI(t, args[1:]...)
		if code == ExitError {
			t.Fatalf("%s: exit %d\n%s", line, code, stderr)
		}
	case len(args) > 0 && args[0] == "sops":
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		stdout = string(sopscli.Run(t, wd, env, args[1:]...))
	default:
		t.Fatalf("%q: not a flotilla or sops command", line)
	}
	if out != "" {
		if err := os.WriteFile(out, []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return stdout, code
}

// TestSecretsDocsCommands runs the Secrets section's commands as written,
// with the real sops CLI, on the template's production fleet (member1 and
// edge-1, each with its own age key): encrypting a Secret of
// apps/payments from the fleet repo's root, then rotating member1's key,
// after which the plan lists the re-keyed unit and exits 1.
func TestSecretsDocsCommands(t *testing.T) {
	sopscli.Require(t)
	blocks := docsShellBlocks(t, fleetRepoDocs, "Secrets")
	encrypt := blockWith(t, blocks, "--encrypt")
	rotate := blockWith(t, blocks, "updatekeys")

	// The command's own example gives the same commands.
	recipients, _, err := NewRootCommand().Find([]string{"secrets", "recipients"})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range encrypt {
		if strings.HasPrefix(line, "sops") && !strings.Contains(recipients.Example, "\n  "+line+"\n") {
			t.Errorf("flotilla secrets recipients --help does not show %q:\n%s", line, recipients.Example)
		}
	}

	dir := initFleet(t)
	member1, edge1 := sopscli.NewKey(t), sopscli.NewKey(t)
	for name, k := range map[string]sopscli.Key{"member1": member1, "edge-1": edge1} {
		keyFile := filepath.Join(dir, name+".agekey")
		if err := os.WriteFile(keyFile, k.File, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, stderr, code := runCLI(t, "bootstrap", name, "--repo", dir, "--repo-url", fleetURL, "--sops-age-key", keyFile, "--force"); code != ExitOK {
			t.Fatalf("bootstrap %s: exit %d: %s", name, code, stderr)
		}
	}
	const secret = "docs-plaintext-Hq3Zn7"
	for name, content := range map[string]string{
		"apps/payments/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: payments
spec:
  source:
    manifests:
      path: .
  namespace: shop
  syncPolicies:
    - destination:
        fleet: production
`,
		"apps/payments/db-secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + secret + "\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The test binaries are found from the working directory: pin them
	// before leaving it.
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(testenv.BinDirEnv, bin)
	t.Chdir(dir) // the docs' commands run in the fleet repo's root

	for _, line := range encrypt {
		runDocsLine(t, line)
	}
	enc, err := os.ReadFile("apps/payments/db-secret.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(enc), secret) || !strings.Contains(string(enc), "ENC[AES256_GCM") || !strings.Contains(string(enc), "name: db") {
		t.Fatalf("the documented commands did not encrypt only the Secret's data:\n%s", enc)
	}
	for name, k := range map[string]sopscli.Key{"member1": member1, "edge-1": edge1} {
		if got := sopscli.Decrypt(t, "db-secret.yaml", enc, k.File, ""); !strings.Contains(string(got), secret) {
			t.Errorf("%s's key does not decrypt the file", name)
		}
	}
	if _, stderr, code := planCLI(t, "render", "--check"); code != ExitOK {
		t.Fatalf("render --check after the documented commands: exit %d\n%s", code, stderr)
	}
	// Private keys stay out of Git, as they would for a user.
	if err := os.WriteFile(".gitignore", []byte("*.agekey\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	planGit(t, dir, "init", "-q", "-b", "main")
	planGit(t, dir, "add", "-A")
	planGit(t, dir, "commit", "-q", "-m", "payments db secret")
	planGit(t, dir, "update-ref", "refs/remotes/origin/main", "main")

	// Steps 1 and 2 of the rotation make member1's new key; step 3 sets
	// it as member1's recipient, then runs the documented commands.
	newKey := sopscli.NewKey(t)
	if err := os.WriteFile("member1-new.agekey", newKey.File, 0o600); err != nil {
		t.Fatal(err)
	}
	editFile(t, filepath.Join(dir, "clusters", "member1.yaml"), member1.Recipient, newKey.Recipient)
	var planOut string
	planCode := -1
	for _, line := range rotate {
		out, code := runDocsLine(t, line)
		if strings.HasPrefix(line, "flotilla plan") {
			planOut, planCode = out, code
		}
	}
	rekeyed, err := os.ReadFile("apps/payments/db-secret.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := sopscli.Decrypt(t, "db-secret.yaml", rekeyed, newKey.File, ""); !strings.Contains(string(got), secret) {
		t.Error("member1's new key does not decrypt the re-keyed file")
	}
	if got := sopscli.Decrypt(t, "db-secret.yaml", rekeyed, edge1.File, ""); !strings.Contains(string(got), secret) {
		t.Error("edge-1's key does not decrypt the re-keyed file")
	}
	if planCode != ExitChanges {
		t.Fatalf("the documented plan exits %d, want %d (changes):\n%s", planCode, ExitChanges, planOut)
	}
	for _, want := range []string{"~ cluster member1", "~ cluster edge-1", "~ unit payments",
		"no object differs: SOPS files re-keyed or re-encrypted, their encrypted values unchanged (apps/payments/db-secret.yaml)"} {
		if !strings.Contains(planOut, want) {
			t.Errorf("the plan does not say %q:\n%s", want, planOut)
		}
	}
	if strings.Contains(planOut, secret) {
		t.Error("the plan holds the plaintext")
	}
}
