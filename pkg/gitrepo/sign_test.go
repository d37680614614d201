package gitrepo_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
	"github.com/flotilla-gitops/flotilla/test/prereqs"
	"github.com/flotilla-gitops/flotilla/test/testkeys"
)

// signedCommit pushes one signed commit into a new local bare repository
// and returns the repository and the commit.
func signedCommit(t *testing.T, signer signature.Signer) (string, gitrepo.Commit) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "r.git")
	git(t, "", "init", "-q", "--bare", dir)
	res, err := gitrepo.PushFiles(context.Background(), dir, "refs/heads/main", map[string][]byte{"status.yaml": []byte("ok\n")},
		"signed status", agent("member1"), gitrepo.PushOptions{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	c, err := gitrepo.ReadCommit(dir, res.Hash)
	if err != nil {
		t.Fatal(err)
	}
	return dir, c
}

func TestSignAndVerify(t *testing.T) {
	keys := map[string]testkeys.Key{
		"ssh-ed25519": testkeys.SSH(t, "member1@fleet"),
		"ssh-rsa":     testkeys.RSA(t, "member2@fleet"),
		"openpgp":     testkeys.PGP(t, "member3"),
	}
	others := map[string]testkeys.Key{
		"ssh-ed25519": testkeys.SSH(t, "other"),
		"ssh-rsa":     testkeys.SSH(t, "other"),
		"openpgp":     testkeys.PGP(t, "other"),
	}
	for kind, key := range keys {
		t.Run(kind, func(t *testing.T) {
			signer, err := signature.ParseSigningKey(key.Private, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, commit := signedCommit(t, signer)
			wantHeader := "-----BEGIN SSH SIGNATURE-----"
			if kind == "openpgp" {
				wantHeader = "-----BEGIN PGP SIGNATURE-----"
			}
			if !strings.HasPrefix(commit.RawSignature, wantHeader) {
				t.Fatalf("signature = %q", commit.RawSignature)
			}
			for _, tc := range []struct {
				name string
				ring map[string][]byte
				want error
			}{
				{"trusted", map[string][]byte{"k": []byte(key.Public), "o": []byte(others[kind].Public)}, nil},
				{"other key only", map[string][]byte{"o": []byte(others[kind].Public)}, signature.ErrUntrustedSigner},
				{"no keys", nil, signature.ErrUntrustedSigner},
			} {
				ring, err := signature.ParseKeyRing(tc.ring)
				if err != nil {
					t.Fatal(err)
				}
				v, err := commit.Verify(ring)
				if !errors.Is(err, tc.want) {
					t.Fatalf("%s: Verify = %+v, %v; want %v", tc.name, v, err, tc.want)
				}
				if tc.want == nil && (v.Fingerprint == "" || v.Identity == "" || (v.Format == "ssh") == (kind == "openpgp")) {
					t.Fatalf("%s: verification = %+v", tc.name, v)
				}
			}
		})
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	key := testkeys.SSH(t, "member1")
	signer, _ := signature.ParseSigningKey(key.Private, nil)
	payload := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor a <a@b> 1 +0000\ncommitter a <a@b> 1 +0000\n\nmsg\n")
	sig, err := signer.Sign(bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	ring, _ := signature.ParseKeyRing(map[string][]byte{"k": []byte(key.Public)})
	if _, err := ring.Verify(payload, string(sig)); err != nil {
		t.Fatalf("untampered: %v", err)
	}
	tampered := bytes.Replace(payload, []byte("msg"), []byte("evil"), 1)
	if _, err := ring.Verify(tampered, string(sig)); !errors.Is(err, signature.ErrBadSignature) {
		t.Fatalf("tampered payload: %v, want ErrBadSignature", err)
	}
	broken := strings.Replace(string(sig), "A", "B", 3)
	if _, err := ring.Verify(payload, broken); !errors.Is(err, signature.ErrBadSignature) && !errors.Is(err, signature.ErrUntrustedSigner) {
		t.Fatalf("corrupted signature: %v", err)
	}
	if _, err := ring.Verify(payload, "-----BEGIN SOMETHING-----\n"); !errors.Is(err, signature.ErrBadSignature) {
		t.Fatalf("unknown format: %v", err)
	}

	pk := testkeys.PGP(t, "p")
	psigner, _ := signature.ParseSigningKey(pk.Private, nil)
	psig, _ := psigner.Sign(bytes.NewReader(payload))
	pring, _ := signature.ParseKeyRing(map[string][]byte{"p": []byte(pk.Public)})
	if _, err := pring.Verify(tampered, string(psig)); !errors.Is(err, signature.ErrBadSignature) {
		t.Fatalf("tampered OpenPGP payload: %v, want ErrBadSignature", err)
	}
}

func TestSSHSignaturesInteroperateWithGit(t *testing.T) {
	prereqs.Require(t, "ssh-keygen") // git signs and verifies SSH signatures with it
	key := testkeys.SSH(t, "member1@fleet")
	keyDir := t.TempDir()
	keyFile := filepath.Join(keyDir, "id")
	os.WriteFile(keyFile, key.Private, 0o600)
	allowed := filepath.Join(keyDir, "allowed_signers")
	// allowed_signers: principal, then the key.
	os.WriteFile(allowed, []byte("member1@fleet "+key.Public), 0o644)
	sshCfg := []string{"-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile=" + allowed}

	// Ours → git.
	signer, err := signature.ParseSigningKey(key.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir, commit := signedCommit(t, signer)
	if out, err := gitErr(t, "", append(append([]string{"--git-dir=" + dir}, sshCfg...), "verify-commit", commit.Hash)...); err != nil {
		t.Fatalf("git verify-commit of our signature: %v: %s", err, out)
	}

	// git → ours, with the allowed_signers file as the trusted keys.
	work := t.TempDir()
	git(t, work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "f"), []byte("x"), 0o644)
	git(t, work, "add", "f")
	git(t, work, append(sshCfg, "-c", "user.signingkey="+keyFile, "commit", "-q", "-S", "-m", "signed by git")...)
	gc, err := gitrepo.ReadCommit(work, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signature.LoadKeyRing(keyDir + "/trusted"); err == nil {
		t.Fatal("LoadKeyRing of a missing dir succeeded")
	}
	trusted := filepath.Join(keyDir, "trusted")
	os.Mkdir(trusted, 0o755)
	os.WriteFile(filepath.Join(trusted, "allowed_signers"), []byte("member1@fleet "+key.Public), 0o644)
	ring, err := signature.LoadKeyRing(trusted)
	if err != nil {
		t.Fatal(err)
	}
	v, err := gc.Verify(ring)
	if err != nil || v.Format != "ssh" || v.Identity != "member1@fleet" || !strings.HasPrefix(v.Fingerprint, "SHA256:") {
		t.Fatalf("verify git's signature = %+v, %v", v, err)
	}
}

func TestOpenPGPSignaturesInteroperateWithGit(t *testing.T) {
	prereqs.Require(t, "gpg", "gpgconf")
	key := testkeys.PGP(t, "member1")
	gnupg, err := os.MkdirTemp("", "gpg") // short: gpg's socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(gnupg)
	os.WriteFile(filepath.Join(gnupg, "pub.asc"), []byte(key.Public), 0o644)
	t.Setenv("GNUPGHOME", gnupg)
	defer exec.Command("gpgconf", "--kill", "all").Run()
	if out, err := exec.Command("gpg", "--batch", "--quiet", "--import", filepath.Join(gnupg, "pub.asc")).CombinedOutput(); err != nil {
		t.Fatalf("gpg import: %v: %s", err, out)
	}
	signer, err := signature.ParseSigningKey(key.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir, commit := signedCommit(t, signer)
	if out, err := gitErr(t, "", "--git-dir="+dir, "verify-commit", commit.Hash); err != nil {
		t.Fatalf("git verify-commit of our OpenPGP signature: %v: %s", err, out)
	}
}

func TestLoadKeyRingFromSecretVolume(t *testing.T) {
	// A Secret volume: files are symlinks into a ..data directory.
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_01_01")
	os.Mkdir(data, 0o755)
	a, b := testkeys.SSH(t, "a"), testkeys.PGP(t, "b")
	os.WriteFile(filepath.Join(data, "a.pub"), []byte(a.Public), 0o644)
	os.WriteFile(filepath.Join(data, "b.asc"), []byte(b.Public), 0o644)
	os.Symlink(filepath.Base(data), filepath.Join(dir, "..data"))
	os.Symlink("..data/a.pub", filepath.Join(dir, "a.pub"))
	os.Symlink("..data/b.asc", filepath.Join(dir, "b.asc"))
	ring, err := signature.LoadKeyRing(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ring.Len() != 2 {
		t.Fatalf("ring has %d keys, want 2", ring.Len())
	}
	if _, err := signature.ParseKeyRing(map[string][]byte{"bad": []byte("not a key\n")}); err == nil {
		t.Fatal("garbage accepted as a key")
	}
}

func TestParseSigningKey(t *testing.T) {
	if _, err := signature.ParseSigningKey([]byte("garbage"), nil); err == nil {
		t.Fatal("garbage accepted")
	}
	// An encrypted OpenSSH key needs its passphrase.
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(k, "c", []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	enc := pem.EncodeToMemory(block)
	if _, err := signature.ParseSigningKey(enc, nil); err == nil {
		t.Fatal("encrypted key parsed without passphrase")
	}
	if _, err := signature.ParseSigningKey(enc, []byte("pw")); err != nil {
		t.Fatalf("encrypted key with passphrase: %v", err)
	}
}

func FuzzVerifySignature(f *testing.F) {
	key := testkeys.SSH(f, "k")
	signer, _ := signature.ParseSigningKey(key.Private, nil)
	sig, _ := signer.Sign(strings.NewReader("payload"))
	ring, _ := signature.ParseKeyRing(map[string][]byte{"k": []byte(key.Public)})
	f.Add(string(sig))
	f.Add("-----BEGIN SSH SIGNATURE-----\nU1NIU0lHAAAAAQ==\n-----END SSH SIGNATURE-----\n")
	f.Add("-----BEGIN PGP SIGNATURE-----\n\nwnUEABYKAB0WIQQ=\n-----END PGP SIGNATURE-----\n")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ring.Verify([]byte("payload"), s)
		if err == nil && (v.Format != "ssh" || v.Fingerprint == "") {
			t.Fatalf("verified without saying by what: %+v", v)
		}
		if err != nil && !errors.Is(err, signature.ErrBadSignature) && !errors.Is(err, signature.ErrUntrustedSigner) && !errors.Is(err, signature.ErrUnsigned) {
			t.Fatalf("unclassified error: %v", err)
		}
	})
}

func FuzzParseKeyRing(f *testing.F) {
	f.Add([]byte(testkeys.SSH(f, "k").Public))
	f.Add([]byte("principal@x ssh-ed25519 AAAA\n# comment\n"))
	f.Add([]byte(testkeys.PGP(f, "p").Public))
	f.Fuzz(func(t *testing.T, b []byte) {
		ring, err := signature.ParseKeyRing(map[string][]byte{"f": b})
		if err == nil && ring.Len() == 0 {
			t.Fatal("no error and no keys")
		}
	})
}
