package signature

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"golang.org/x/crypto/ssh"
)

// Verification outcomes, matched with errors.Is.
var (
	// ErrUnsigned: the commit carries no signature.
	ErrUnsigned = errors.New("commit is not signed")
	// ErrUntrustedSigner: the commit is signed by a key that is not trusted.
	ErrUntrustedSigner = errors.New("commit signed by an untrusted key")
	// ErrBadSignature: the signature is malformed or does not match the commit.
	ErrBadSignature = errors.New("bad commit signature")
)

// KeyRing holds the trusted public keys for signature verification:
// OpenPGP keys and SSH keys. The zero value trusts nothing.
type KeyRing struct {
	pgp openpgp.EntityList
	ssh []trustedSSHKey
}

type trustedSSHKey struct {
	key  ssh.PublicKey
	name string // the principal, comment or file it came from
}

// Verification says who signed a commit.
type Verification struct {
	Format      string // "openpgp" or "ssh"
	Fingerprint string // OpenPGP primary key fingerprint (hex) or SSH "SHA256:…"
	Identity    string // the OpenPGP user ID, or the SSH key's principal or comment
}

// ParseKeyRing builds a KeyRing from named contents (e.g. the files of a
// mounted Secret). Each content is either armored OpenPGP public keys
// ("-----BEGIN PGP PUBLIC KEY BLOCK-----", one or more) or SSH public keys,
// one per line, in authorized_keys or git allowed_signers format
// ("principal[,principal] [options] key-type base64 [comment]"); blank lines
// and # comments are skipped. An unparsable content is an error naming it.
func ParseKeyRing(contents map[string][]byte) (*KeyRing, error) {
	names := make([]string, 0, len(contents))
	for n := range contents {
		names = append(names, n)
	}
	sort.Strings(names)
	k := &KeyRing{}
	for _, name := range names {
		data := contents[name]
		if bytes.Contains(data, []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----")) {
			list, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(data))
			if err != nil {
				return nil, fmt.Errorf("trusted key %s: %w", name, err)
			}
			if len(list) == 0 {
				return nil, fmt.Errorf("trusted key %s: no keys", name)
			}
			k.pgp = append(k.pgp, list...)
			continue
		}
		keys, err := parseSSHKeys(data)
		if err != nil {
			return nil, fmt.Errorf("trusted key %s: %w", name, err)
		}
		for i := range keys {
			if keys[i].name == "" {
				keys[i].name = name
			}
		}
		k.ssh = append(k.ssh, keys...)
	}
	return k, nil
}

// LoadKeyRing reads every regular file of dir (a mounted Secret; the
// ..data indirection and dotfiles are skipped) into a KeyRing. Call it
// again to pick up rotated keys.
func LoadKeyRing(dir string) (*KeyRing, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("trusted keys: %w", err)
	}
	contents := map[string][]byte{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Stat(p) // follows the Secret volume's symlinks
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("trusted keys: %w", err)
		}
		contents[e.Name()] = b
	}
	return ParseKeyRing(contents)
}

// Len is the number of trusted keys.
func (k *KeyRing) Len() int {
	if k == nil {
		return 0
	}
	return len(k.pgp) + len(k.ssh)
}

func parseSSHKeys(data []byte) ([]trustedSSHKey, error) {
	var out []trustedSSHKey
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if key, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(text)); err == nil {
			out = append(out, trustedSSHKey{key: key, name: comment})
			continue
		}
		// allowed_signers: principals first, then authorized_keys syntax.
		principals, rest, ok := strings.Cut(text, " ")
		if !ok {
			return nil, fmt.Errorf("line %d: not an SSH public key", line)
		}
		key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(rest)))
		if err != nil {
			return nil, fmt.Errorf("line %d: not an SSH public key", line)
		}
		out = append(out, trustedSSHKey{key: key, name: principals})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no keys")
	}
	return out, nil
}

// Verify checks signature (armored OpenPGP or SSH) over payload. It returns
// ErrUnsigned for an empty signature, ErrUntrustedSigner when the key that
// made it is not in the ring (or is expired or revoked), and ErrBadSignature
// when it is malformed or does not match the payload.
func (k *KeyRing) Verify(payload []byte, signature string) (Verification, error) {
	sig := strings.TrimSpace(signature)
	switch {
	case sig == "":
		return Verification{}, ErrUnsigned
	case strings.HasPrefix(sig, sshsigBegin):
		return k.verifySSH(payload, sig)
	case strings.HasPrefix(sig, "-----BEGIN PGP SIGNATURE-----"):
		return k.verifyPGP(payload, signature)
	}
	return Verification{}, fmt.Errorf("%w: unknown signature format", ErrBadSignature)
}

func (k *KeyRing) verifySSH(payload []byte, signature string) (Verification, error) {
	sig, err := parseSSHSig(signature)
	if err != nil {
		return Verification{}, fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	fp := ssh.FingerprintSHA256(sig.publicKey)
	var trusted *trustedSSHKey
	if k != nil {
		want := sig.publicKey.Marshal()
		for i := range k.ssh {
			if bytes.Equal(k.ssh[i].key.Marshal(), want) {
				trusted = &k.ssh[i]
				break
			}
		}
	}
	if trusted == nil {
		return Verification{}, fmt.Errorf("%w: ssh key %s", ErrUntrustedSigner, fp)
	}
	if err := sig.verify(payload); err != nil {
		return Verification{}, fmt.Errorf("%w: ssh key %s: %w", ErrBadSignature, fp, err)
	}
	return Verification{Format: "ssh", Fingerprint: fp, Identity: trusted.name}, nil
}

func (k *KeyRing) verifyPGP(payload []byte, signature string) (Verification, error) {
	var ring openpgp.EntityList
	if k != nil {
		ring = k.pgp
	}
	entity, err := openpgp.CheckArmoredDetachedSignature(ring, bytes.NewReader(payload), strings.NewReader(signature), nil)
	switch {
	case err == nil:
	case errors.Is(err, pgperrors.ErrUnknownIssuer),
		errors.Is(err, pgperrors.ErrKeyExpired),
		errors.Is(err, pgperrors.ErrKeyRevoked),
		errors.Is(err, pgperrors.ErrSignatureExpired):
		return Verification{}, fmt.Errorf("%w: %w", ErrUntrustedSigner, err)
	default:
		return Verification{}, fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	v := Verification{Format: "openpgp", Fingerprint: fmt.Sprintf("%X", entity.PrimaryKey.Fingerprint)}
	for name := range entity.Identities {
		if v.Identity == "" || name < v.Identity {
			v.Identity = name // deterministic when there are several
		}
	}
	return v, nil
}
