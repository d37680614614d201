package sopsdecrypt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"
	sopsage "github.com/getsops/sops/v3/age"
)

// macOnlyEncryptedInit starts the MAC of a document with
// mac_only_encrypted: true (sops.MACOnlyEncryptedInitialization).
var macOnlyEncryptedInit = []byte{0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0xb, 0xb, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69}

// encRe is sops' value encoding (aes.Cipher's format).
var encRe = regexp.MustCompile(`^ENC\[AES256_GCM,data:(.+),iv:(.+),tag:(.+),type:(.+)\]`)

func isEncrypted(s string) bool { return strings.HasPrefix(s, "ENC[AES256_GCM,") }

// Decrypt decrypts the document with the first identity that opens its
// data key, verifies the MAC, and returns the plaintext in the document's
// format (a binary document: its content).
func (d *Document) Decrypt(identities []age.Identity) ([]byte, error) {
	key, err := d.dataKey(identities)
	if err != nil {
		return nil, err
	}
	return d.decryptWithKey(key)
}

// decryptWithKey decrypts every value with the data key and checks the MAC.
func (d *Document) decryptWithKey(key []byte) ([]byte, error) {
	h := sha512.New()
	if d.meta.MACOnlyEncrypted {
		h.Write(macOnlyEncryptedInit)
	}
	m := d.mapLeaves(func(v any, p []string) (any, error) {
		encrypted := false
		if s, ok := v.(string); ok && isEncrypted(s) {
			pv, err := decryptValue(s, key, strings.Join(p, ":")+":")
			if err != nil {
				return nil, fmt.Errorf("%w: value at %q does not decrypt", ErrMAC, strings.Join(p, "."))
			}
			v, encrypted = pv, true
		}
		if !d.meta.MACOnlyEncrypted || encrypted {
			h.Write(toBytes(v))
		}
		return v, nil
	})
	if m.err != nil {
		return nil, m.err
	}
	if err := d.checkMAC(key, fmt.Sprintf("%X", h.Sum(nil))); err != nil {
		return nil, err
	}
	return m.doc.emit()
}

// checkMAC compares the MAC of the decrypted values with the document's,
// which is itself encrypted with the data key and the lastmodified time
// as additional data.
func (d *Document) checkMAC(key []byte, computed string) error {
	lm, err := time.Parse(time.RFC3339, d.meta.LastModified)
	if err != nil {
		return fmt.Errorf("%w: lastmodified is not an RFC 3339 time", ErrMalformed)
	}
	stored, err := decryptValue(d.meta.MAC, key, lm.Format(time.RFC3339))
	if err != nil {
		return fmt.Errorf("%w: the mac does not decrypt", ErrMAC)
	}
	s, ok := stored.(string)
	if !ok || subtle.ConstantTimeCompare([]byte(s), []byte(computed)) != 1 {
		return fmt.Errorf("%w: the file was modified after it was encrypted", ErrMAC)
	}
	return nil
}

// dataKey recovers the document's data key with sops' age key source.
func (d *Document) dataKey(identities []age.Identity) ([]byte, error) {
	if len(d.meta.KeyGroups) > 0 {
		return nil, fmt.Errorf("%w: key groups (Shamir secret sharing)", ErrUnsupported)
	}
	if len(d.meta.Age) == 0 {
		return nil, fmt.Errorf("%w: no age recipient (only age keys are supported)", ErrUnsupported)
	}
	if len(identities) == 0 {
		// sops' key source would fall back to SOPS_AGE_KEY and the user's
		// key file: the agent's own environment must never be a key.
		return nil, fmt.Errorf("%w: this cluster has no age key; the file is encrypted for %s", ErrNoKey, strings.Join(d.Recipients(), ", "))
	}
	for _, a := range d.meta.Age {
		mk := &sopsage.MasterKey{Recipient: a.Recipient, EncryptedKey: a.Enc}
		sopsage.ParsedIdentities(identities).ApplyToMasterKey(mk)
		key, err := mk.Decrypt()
		if err == nil && len(key) == 32 {
			return key, nil
		}
	}
	return nil, fmt.Errorf("%w: the file is encrypted for %s, none of which is this cluster's key", ErrNoKey, strings.Join(d.Recipients(), ", "))
}

// decryptValue opens one ENC[AES256_GCM,…] value as sops' aes.Cipher does.
func decryptValue(s string, key []byte, additionalData string) (any, error) {
	m := encRe.FindStringSubmatch(s)
	if m == nil {
		return nil, errors.New("not an encrypted value")
	}
	var parts [3][]byte
	for i := range parts {
		b, err := base64.StdEncoding.DecodeString(m[i+1])
		if err != nil {
			return nil, errors.New("bad base64")
		}
		parts[i] = b
	}
	data, iv, tag := parts[0], parts[1], parts[2]
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	if len(iv) == 0 {
		return nil, errors.New("empty iv")
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(iv))
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, iv, append(data[:len(data):len(data)], tag...), []byte(additionalData))
	if err != nil {
		return nil, errors.New("authentication failed")
	}
	str := string(plain)
	switch m[4] {
	case "str":
		return str, nil
	case "int":
		return strconv.Atoi(str)
	case "float":
		return strconv.ParseFloat(str, 64)
	case "bool":
		return strconv.ParseBool(str)
	case "bytes":
		return plain, nil
	case "comment":
		// Encrypted comments live in YAML comments, which are not loaded.
		return nil, errors.New("comment value")
	}
	return nil, errors.New("unknown value type")
}

// toBytes is sops.ToBytes: how a value enters the MAC.
func toBytes(v any) []byte {
	switch v := v.(type) {
	case string:
		return []byte(v)
	case []byte:
		return v
	case int:
		return []byte(strconv.Itoa(v))
	case float64:
		return []byte(strconv.FormatFloat(v, 'f', -1, 64))
	case bool:
		if v {
			return []byte("True")
		}
		return []byte("False")
	}
	return nil
}
