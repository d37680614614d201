package sopsdecrypt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"filippo.io/age"
)

// Keyring decrypts documents with the age identities Load returns. The
// agent loads them from its Secret at each use, so a rotated key takes
// effect at the next render without a restart.
type Keyring struct {
	Load func(ctx context.Context) ([]age.Identity, error)
}

// Decrypt decrypts doc with the loaded identities.
func (k *Keyring) Decrypt(ctx context.Context, doc *Document) ([]byte, error) {
	ids, err := k.Load(ctx)
	if err != nil {
		return nil, err
	}
	return doc.Decrypt(ids)
}

// ParseIdentities reads age identities in the age-keygen file format
// (AGE-SECRET-KEY-1… lines, # comments). Errors never quote the input.
func ParseIdentities(data []byte) ([]age.Identity, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	ids, err := age.ParseIdentities(bytes.NewReader(data))
	if err != nil {
		return nil, errors.New("the age key is not in age-keygen format (AGE-SECRET-KEY-1… lines)")
	}
	return ids, nil
}

// GenerateKey makes a new age X25519 key: the identity file content (as
// age-keygen writes it) and its public recipient.
func GenerateKey() (identity []byte, recipient string, err error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, "", fmt.Errorf("generating an age key: %w", err)
	}
	recipient = id.Recipient().String()
	var b strings.Builder
	b.WriteString("# public key: " + recipient + "\n")
	b.WriteString(id.String() + "\n")
	return []byte(b.String()), recipient, nil
}

// ParseRecipient checks an age recipient (age1…).
func ParseRecipient(s string) error {
	if _, err := age.ParseX25519Recipient(s); err != nil {
		return fmt.Errorf("not an age recipient (age1…): %w", err)
	}
	return nil
}

// RecipientOf is the recipient of the single X25519 identity in an age
// identity file (what `age-keygen -y` prints).
func RecipientOf(identityFile []byte) (string, error) {
	ids, err := ParseIdentities(identityFile)
	if err != nil {
		return "", err
	}
	if len(ids) != 1 {
		return "", fmt.Errorf("the age key file holds %d identities, want one", len(ids))
	}
	x, ok := ids[0].(*age.X25519Identity)
	if !ok {
		return "", errors.New("the age key is not an X25519 identity")
	}
	return x.Recipient().String(), nil
}
