package sopsdecrypt

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
)

// Error classes (errors.Is).
var (
	// ErrMalformed: the file has SOPS metadata but cannot be read as a SOPS
	// document of its format.
	ErrMalformed = errors.New("malformed sops document")
	// ErrUnsupported: a SOPS feature the agent does not decrypt (no age
	// recipient, Shamir key groups).
	ErrUnsupported = errors.New("unsupported sops document")
	// ErrNoKey: none of the identities decrypts the file's data key.
	ErrNoKey = errors.New("no matching age key")
	// ErrMAC: a value does not decrypt, or the values do not match the MAC:
	// the file was changed after it was encrypted.
	ErrMAC = errors.New("sops mac mismatch")
)

// RedactedPrefix starts every value Redacted puts where an encrypted value
// was: "sops-encrypted:sha256:" and 16 hex digits of the SHA-256 of the
// ciphertext, so a changed ciphertext shows as a changed value while the
// marker reveals nothing the repository does not already show.
const RedactedPrefix = "sops-encrypted:sha256:"

// Format is how a SOPS document is stored, chosen by file extension as
// sops itself does.
type Format int

const (
	YAML Format = iota
	JSON
	Dotenv
	// Binary is any other file: sops stores it as JSON {"data": …, "sops": …}.
	Binary
)

// FormatForPath is the format sops uses for a file name.
func FormatForPath(name string) Format {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml":
		return YAML
	case ".json":
		return JSON
	case ".env":
		return Dotenv
	}
	return Binary
}

// item is one key of a mapping; values are string, int, float64, bool,
// nil, []any or branch, as sops' stores load them.
type item struct {
	key   string
	value any
}

type branch []item

// ageStanza is one age recipient of the data key.
type ageStanza struct {
	Recipient string `yaml:"recipient" json:"recipient"`
	Enc       string `yaml:"enc" json:"enc"`
}

// metadata is the part of the "sops" section the agent uses.
type metadata struct {
	Age              []ageStanza `yaml:"age" json:"age"`
	KeyGroups        []any       `yaml:"key_groups" json:"key_groups"`
	LastModified     string      `yaml:"lastmodified" json:"lastmodified"`
	MAC              string      `yaml:"mac" json:"mac"`
	MACOnlyEncrypted bool        `yaml:"mac_only_encrypted" json:"mac_only_encrypted"`
}

// Document is a parsed SOPS document.
type Document struct {
	format   Format
	branches []branch // YAML may hold several documents
	meta     metadata
}

// Format is the document's format.
func (d *Document) Format() Format { return d.format }

// Recipients are the age recipients the data key is encrypted for.
func (d *Document) Recipients() []string {
	out := make([]string, 0, len(d.meta.Age))
	for _, a := range d.meta.Age {
		out = append(out, a.Recipient)
	}
	return out
}

// Parse reads data as a SOPS document of format f. It returns nil and no
// error when data is not a SOPS document (no sops metadata with a MAC), so
// callers can pass every file through it; a cheap byte check skips most.
func Parse(f Format, data []byte) (*Document, error) {
	switch f {
	case YAML:
		if !bytes.Contains(data, []byte("sops")) || !bytes.Contains(data, []byte("mac")) {
			return nil, nil
		}
		return parseYAML(data)
	case JSON, Binary:
		if !bytes.Contains(data, []byte(`"sops"`)) || !bytes.Contains(data, []byte(`"mac"`)) {
			return nil, nil
		}
		return parseJSON(f, data)
	case Dotenv:
		if !bytes.Contains(data, []byte("sops_mac=")) {
			return nil, nil
		}
		return parseDotenv(data)
	}
	return nil, fmt.Errorf("%w: unknown format %d", ErrUnsupported, f)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
