package testkeys

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"io"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"golang.org/x/crypto/ssh"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
)

// Key is a commit signing key.
type Key struct {
	Signer signature.Signer
	// Private is an OpenSSH PEM block or an armored OpenPGP private key.
	Private []byte
	// Public is one trusted-keys entry: an authorized_keys line with the
	// comment, or an armored OpenPGP public key; it ends in a newline.
	Public string
}

// Line is Public without its trailing newline (an SSH key as a YAML list
// item holds it).
func (k Key) Line() string { return strings.TrimSpace(k.Public) }

// SSH is a new ed25519 SSH key; comment ends its public line.
func SSH(t testing.TB, comment string) Key {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return sshKey(t, priv, comment)
}

// SSHSeeded is the ed25519 SSH key of seed: the same seed, the same key.
func SSHSeeded(t testing.TB, seed byte, comment string) Key {
	t.Helper()
	return sshKey(t, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)), comment)
}

// RSA is a new 2048-bit RSA SSH key.
func RSA(t testing.TB, comment string) Key {
	t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return sshKey(t, priv, comment)
}

func sshKey(t testing.TB, priv crypto.Signer, comment string) Key {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if comment != "" {
		line += " " + comment
	}
	return withSigner(t, Key{Private: pem.EncodeToMemory(block), Public: line + "\n"})
}

// PGP is a new OpenPGP (EdDSA) key of name <name@example.com>.
func PGP(t testing.TB, name string) Key {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", strings.ToLower(name)+"@example.com", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	armored := func(typ string, write func(w io.Writer) error) []byte {
		var b bytes.Buffer
		w, err := armor.Encode(&b, typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := write(w); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return append(b.Bytes(), '\n')
	}
	priv := armored(openpgp.PrivateKeyType, func(w io.Writer) error { return e.SerializePrivate(w, nil) })
	pub := armored(openpgp.PublicKeyType, e.Serialize)
	return withSigner(t, Key{Private: priv, Public: string(pub)})
}

func withSigner(t testing.TB, k Key) Key {
	t.Helper()
	s, err := signature.ParseSigningKey(k.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	k.Signer = s
	return k
}
