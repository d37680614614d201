package signature

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"golang.org/x/crypto/ssh"
)

// Signer signs the encoded commit (without signature) and returns the
// armored signature; the method set matches go-git's Signer.
type Signer interface {
	Sign(message io.Reader) ([]byte, error)
}

// ParseSigningKey builds a Signer from a private key: an armored OpenPGP
// secret key ("-----BEGIN PGP PRIVATE KEY BLOCK-----") signs like
// `git commit -S`; an SSH private key (OpenSSH or PEM) signs like git with
// gpg.format=ssh (an SSHSIG signature, namespace "git", sha512).
// passphrase is used when the key is encrypted.
func ParseSigningKey(key, passphrase []byte) (Signer, error) {
	if bytes.Contains(key, []byte("-----BEGIN PGP PRIVATE KEY BLOCK-----")) {
		return newPGPSigner(key, passphrase)
	}
	var (
		raw any
		err error
	)
	if len(passphrase) > 0 {
		raw, err = ssh.ParseRawPrivateKeyWithPassphrase(key, passphrase)
	} else {
		raw, err = ssh.ParseRawPrivateKey(key)
	}
	if err != nil {
		return nil, fmt.Errorf("parse signing key: not an OpenPGP or SSH private key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(raw)
	if err != nil {
		return nil, fmt.Errorf("parse signing key: %w", err)
	}
	return &sshSigner{signer: signer}, nil
}

type pgpSigner struct{ entity *openpgp.Entity }

func newPGPSigner(key, passphrase []byte) (Signer, error) {
	list, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(key))
	if err != nil {
		return nil, fmt.Errorf("parse OpenPGP key: %w", err)
	}
	for _, e := range list {
		if e.PrivateKey == nil {
			continue
		}
		if e.PrivateKey.Encrypted {
			if err := e.DecryptPrivateKeys(passphrase); err != nil {
				return nil, fmt.Errorf("decrypt OpenPGP key: %w", err)
			}
		}
		return &pgpSigner{entity: e}, nil
	}
	return nil, errors.New("parse OpenPGP key: no private key")
}

func (s *pgpSigner) Sign(message io.Reader) ([]byte, error) {
	var b bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&b, s.entity, message, nil); err != nil {
		return nil, err
	}
	if !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// SSH signatures, PROTOCOL.sshsig in OpenSSH.
const (
	sshsigMagic     = "SSHSIG"
	sshsigVersion   = 1
	sshsigNamespace = "git"
	sshsigBegin     = "-----BEGIN SSH SIGNATURE-----"
	sshsigEnd       = "-----END SSH SIGNATURE-----"
)

type sshSigner struct{ signer ssh.Signer }

func (s *sshSigner) Sign(message io.Reader) ([]byte, error) {
	h := sha512.New()
	if _, err := io.Copy(h, message); err != nil {
		return nil, err
	}
	data := sshsigSignedData(sshsigNamespace, "sha512", h.Sum(nil))
	var sig *ssh.Signature
	var err error
	if as, ok := s.signer.(ssh.AlgorithmSigner); ok && s.signer.PublicKey().Type() == ssh.KeyAlgoRSA {
		// ssh-rsa (SHA-1) signatures are refused by git and by Verify.
		sig, err = as.SignWithAlgorithm(rand.Reader, data, ssh.KeyAlgoRSASHA512)
	} else {
		sig, err = s.signer.Sign(rand.Reader, data)
	}
	if err != nil {
		return nil, err
	}
	var blob bytes.Buffer
	blob.WriteString(sshsigMagic)
	_ = binary.Write(&blob, binary.BigEndian, uint32(sshsigVersion))
	writeSSHString(&blob, s.signer.PublicKey().Marshal())
	writeSSHString(&blob, []byte(sshsigNamespace))
	writeSSHString(&blob, nil)
	writeSSHString(&blob, []byte("sha512"))
	writeSSHString(&blob, ssh.Marshal(sig))
	return armorSSHSig(blob.Bytes()), nil
}

func sshsigSignedData(namespace, hashAlg string, digest []byte) []byte {
	var b bytes.Buffer
	b.WriteString(sshsigMagic)
	writeSSHString(&b, []byte(namespace))
	writeSSHString(&b, nil)
	writeSSHString(&b, []byte(hashAlg))
	writeSSHString(&b, digest)
	return b.Bytes()
}

func writeSSHString(b *bytes.Buffer, s []byte) {
	_ = binary.Write(b, binary.BigEndian, uint32(len(s)))
	b.Write(s)
}

func armorSSHSig(blob []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(blob)
	var b strings.Builder
	b.WriteString(sshsigBegin + "\n")
	for len(enc) > 70 { // ssh-keygen's line width
		b.WriteString(enc[:70] + "\n")
		enc = enc[70:]
	}
	b.WriteString(enc + "\n" + sshsigEnd + "\n")
	return []byte(b.String())
}

// sshsig is a parsed SSH signature.
type sshsig struct {
	publicKey ssh.PublicKey
	namespace string
	hashAlg   string
	signature *ssh.Signature
}

func parseSSHSig(armored string) (*sshsig, error) {
	s := strings.TrimSpace(armored)
	if !strings.HasPrefix(s, sshsigBegin) || !strings.HasSuffix(s, sshsigEnd) {
		return nil, errors.New("not an armored SSH signature")
	}
	body := strings.Join(strings.Fields(strings.TrimSuffix(strings.TrimPrefix(s, sshsigBegin), sshsigEnd)), "")
	blob, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("decode SSH signature: %w", err)
	}
	if !bytes.HasPrefix(blob, []byte(sshsigMagic)) {
		return nil, errors.New("SSH signature: bad magic")
	}
	rest := blob[len(sshsigMagic):]
	if len(rest) < 4 || binary.BigEndian.Uint32(rest) != sshsigVersion {
		return nil, errors.New("SSH signature: unsupported version")
	}
	rest = rest[4:]
	var fields [5][]byte
	for i := range fields {
		if fields[i], rest, err = readSSHString(rest); err != nil {
			return nil, fmt.Errorf("SSH signature: %w", err)
		}
	}
	if len(rest) != 0 {
		return nil, errors.New("SSH signature: trailing data")
	}
	pub, err := ssh.ParsePublicKey(fields[0])
	if err != nil {
		return nil, fmt.Errorf("SSH signature: public key: %w", err)
	}
	format, r, err := readSSHString(fields[4])
	if err != nil {
		return nil, fmt.Errorf("SSH signature: %w", err)
	}
	sigBlob, r, err := readSSHString(r)
	if err != nil {
		return nil, fmt.Errorf("SSH signature: %w", err)
	}
	sig := &ssh.Signature{Format: string(format), Blob: sigBlob}
	if len(r) > 0 {
		sig.Rest = r // sk-* keys carry flags and a counter
	}
	return &sshsig{publicKey: pub, namespace: string(fields[1]), hashAlg: string(fields[3]), signature: sig}, nil
}

func readSSHString(b []byte) ([]byte, []byte, error) {
	if len(b) < 4 {
		return nil, nil, errors.New("truncated")
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, errors.New("truncated")
	}
	return b[4 : 4+n], b[4+n:], nil
}

// verify checks the signature over message; the caller checks the key.
func (s *sshsig) verify(message []byte) error {
	if s.namespace != sshsigNamespace {
		return fmt.Errorf("SSH signature namespace %q, want %q", s.namespace, sshsigNamespace)
	}
	var h hash.Hash
	switch s.hashAlg {
	case "sha512":
		h = sha512.New()
	case "sha256":
		h = sha256.New()
	default:
		return fmt.Errorf("SSH signature hash %q unsupported", s.hashAlg)
	}
	if s.signature.Format == ssh.KeyAlgoRSA {
		return errors.New("SSH signature uses ssh-rsa (SHA-1)")
	}
	h.Write(message)
	return s.publicKey.Verify(sshsigSignedData(s.namespace, s.hashAlg, h.Sum(nil)), s.signature)
}
