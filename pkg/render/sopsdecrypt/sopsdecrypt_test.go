package sopsdecrypt_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"filippo.io/age"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/render/sopsdecrypt"
	"github.com/flotilla-gitops/flotilla/test/sopscli"
)

// The plaintexts carry this marker so a test can prove it never leaks.
const secretWord = "hunter2-plaintext"

const secretYAML = `apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: app
type: Opaque
stringData:
  password: ` + secretWord + `
  port: "5432"
data:
  token: aHVudGVyMi1wbGFpbnRleHQ=
`

const multiDocYAML = `apiVersion: v1
kind: Secret
metadata:
  name: one
stringData:
  a: ` + secretWord + `-one
---
apiVersion: v1
kind: Secret
metadata:
  name: two
stringData:
  b: ` + secretWord + `-two
  n: 3
  f: 1.5
  t: true
  list: [x, y]
`

// configYAML is an application's config file (a secretGenerator input),
// encrypted whole.
const configYAML = `db:
  password: ` + secretWord + `
  port: 5432
  ratio: 0.5
  replicas: [1, 2]
debug: false
empty: ""
nothing: null
`

const secretJSON = `{
  "apiVersion": "v1",
  "kind": "Secret",
  "metadata": {"name": "db-json"},
  "stringData": {"password": "` + secretWord + `", "replicas": 3, "ratio": 0.25, "on": false, "nothing": null}
}
`

const secretEnv = "USER=admin\nPASSWORD=" + secretWord + "\nMULTI=a\\nb\n"

const secretBinary = "-----BEGIN CERT-----\n" + secretWord + "\n-----END CERT-----\n"

// TestDecryptRealSops decrypts what the real sops CLI encrypts and checks
// the result against sops' own decryption.
func TestDecryptRealSops(t *testing.T) {
	sopscli.Require(t)
	k := sopscli.NewKey(t)
	for _, tc := range []struct {
		name, file, plain, inputType string
		opts                         sopscli.Options
		format                       sopsdecrypt.Format
	}{
		{name: "yaml encrypted-regex", file: "secret.yaml", plain: secretYAML, format: sopsdecrypt.YAML,
			opts: sopscli.Options{EncryptedRegex: "^(data|stringData)$"}},
		{name: "yaml mac-only-encrypted", file: "secret.yaml", plain: secretYAML, format: sopsdecrypt.YAML,
			opts: sopscli.Options{EncryptedRegex: "^(data|stringData)$", MACOnlyEncrypted: true}},
		{name: "yaml multi-document", file: "two.yaml", plain: multiDocYAML, format: sopsdecrypt.YAML,
			opts: sopscli.Options{EncryptedRegex: "^(data|stringData)$"}},
		{name: "yaml not a manifest, all encrypted", file: "config.yaml", plain: configYAML, format: sopsdecrypt.YAML},
		{name: "json", file: "secret.json", plain: secretJSON, format: sopsdecrypt.JSON,
			opts: sopscli.Options{EncryptedRegex: "^(data|stringData)$"}},
		{name: "json not a manifest, all encrypted", file: "config.json", plain: `{"db": {"password": "` + secretWord + `", "port": 5432}, "debug": true}`, format: sopsdecrypt.JSON},
		{name: "dotenv", file: "app.env", plain: secretEnv, format: sopsdecrypt.Dotenv, inputType: "dotenv"},
		{name: "binary", file: "tls.crt", plain: secretBinary, format: sopsdecrypt.Binary, inputType: "binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := sopscli.Encrypt(t, tc.file, []byte(tc.plain), tc.opts, k.Recipient)
			if bytes.Contains(enc, []byte(secretWord)) {
				t.Fatalf("sops left the plaintext in:\n%s", enc)
			}
			if got := sopsdecrypt.FormatForPath(tc.file); got != tc.format {
				t.Fatalf("FormatForPath(%s) = %v, want %v", tc.file, got, tc.format)
			}
			doc, err := sopsdecrypt.Parse(tc.format, enc)
			if err != nil || doc == nil {
				t.Fatalf("Parse = %v, %v; want a document", doc, err)
			}
			if r := doc.Recipients(); len(r) != 1 || r[0] != k.Recipient {
				t.Errorf("Recipients = %v, want [%s]", r, k.Recipient)
			}
			got, err := doc.Decrypt(k.Identities)
			if err != nil {
				t.Fatalf("Decrypt: %v", err)
			}
			want := sopscli.Decrypt(t, tc.file, enc, k.File, tc.inputType)
			assertSameDocument(t, tc.format, got, want)

			red, err := doc.Redacted()
			if err != nil {
				t.Fatalf("Redacted: %v", err)
			}
			if bytes.Contains(red, []byte(secretWord)) || bytes.Contains(red, []byte("ENC[")) {
				t.Errorf("redacted document leaks:\n%s", red)
			}
			if !bytes.Contains(red, []byte(sopsdecrypt.RedactedPrefix)) {
				t.Errorf("redacted document has no marker:\n%s", red)
			}
			if bytes.Contains(red, []byte("mac")) && tc.format != sopsdecrypt.Binary {
				t.Errorf("redacted document keeps sops metadata:\n%s", red)
			}
		})
	}
}

func assertSameDocument(t *testing.T, f sopsdecrypt.Format, got, want []byte) {
	t.Helper()
	switch f {
	case sopsdecrypt.YAML, sopsdecrypt.JSON:
		var g, w []any
		for _, d := range strings.Split(string(got), "\n---\n") {
			var v any
			if err := yaml.Unmarshal([]byte(d), &v); err != nil {
				t.Fatalf("our output does not parse: %v", err)
			}
			g = append(g, v)
		}
		for _, d := range strings.Split(string(want), "\n---\n") {
			var v any
			if err := yaml.Unmarshal([]byte(d), &v); err != nil {
				t.Fatalf("sops output does not parse: %v", err)
			}
			w = append(w, v)
		}
		gy, _ := yaml.Marshal(g)
		wy, _ := yaml.Marshal(w)
		if !bytes.Equal(gy, wy) {
			t.Errorf("decrypted:\n%s\nsops decrypts:\n%s", gy, wy)
		}
	default:
		if !bytes.Equal(got, want) {
			t.Errorf("decrypted %q, sops decrypts %q", got, want)
		}
	}
}

// TestDecryptFailures: wrong key, a file for other clusters, no key, a
// tampered value or MAC. None of the errors carries the plaintext.
func TestDecryptFailures(t *testing.T) {
	sopscli.Require(t)
	mine, other, third := sopscli.NewKey(t), sopscli.NewKey(t), sopscli.NewKey(t)
	enc := sopscli.Encrypt(t, "secret.yaml", []byte(secretYAML), sopscli.Options{EncryptedRegex: "^(data|stringData)$"}, other.Recipient, third.Recipient)

	tamper := func(from, to string) []byte {
		t.Helper()
		if !bytes.Contains(enc, []byte(from)) {
			t.Fatalf("fixture has no %q", from)
		}
		return bytes.Replace(enc, []byte(from), []byte(to), 1)
	}
	// Flip one character of the first encrypted value's data.
	i := bytes.Index(enc, []byte("ENC[AES256_GCM,data:")) + len("ENC[AES256_GCM,data:")
	flipped := bytes.Clone(enc)
	if flipped[i] == 'A' {
		flipped[i] = 'B'
	} else {
		flipped[i] = 'A'
	}
	macLine := regexpLine(t, enc, "    mac: ")

	for _, tc := range []struct {
		name string
		data []byte
		ids  []age.Identity
		want error
		says []string
	}{
		{name: "encrypted for other clusters", data: enc, ids: mine.Identities, want: sopsdecrypt.ErrNoKey, says: []string{other.Recipient, third.Recipient}},
		{name: "no key at all", data: enc, ids: nil, want: sopsdecrypt.ErrNoKey, says: []string{"no age key"}},
		{name: "second recipient decrypts", data: enc, ids: third.Identities},
		{name: "tampered ciphertext", data: flipped, ids: other.Identities, want: sopsdecrypt.ErrMAC, says: []string{"password"}},
		{name: "tampered clear value", data: tamper("name: db", "name: dc"), ids: other.Identities, want: sopsdecrypt.ErrMAC},
		{name: "tampered mac", data: tamper(macLine, strings.Replace(macLine, "data:", "data:A", 1)), ids: other.Identities, want: sopsdecrypt.ErrMAC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := sopsdecrypt.Parse(sopsdecrypt.YAML, tc.data)
			if err != nil || doc == nil {
				t.Fatalf("Parse = %v, %v", doc, err)
			}
			out, err := doc.Decrypt(tc.ids)
			if tc.want == nil {
				if err != nil || !bytes.Contains(out, []byte(secretWord)) {
					t.Fatalf("Decrypt = %q, %v; want the plaintext", out, err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decrypt error = %v, want %v", err, tc.want)
			}
			if out != nil {
				t.Errorf("Decrypt returned output with an error")
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), secretWord) || strings.Contains(err.Error(), "AGE-SECRET-KEY") {
				t.Errorf("error leaks: %v", err)
			}
		})
	}
}

func regexpLine(t *testing.T, data []byte, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no line starting with %q", prefix)
	return ""
}

// TestParseRefusesEncryptedIdentity: a manifest encrypted whole cannot be
// planned by the hub; it fails on both sides with a hint.
func TestParseRefusesEncryptedIdentity(t *testing.T) {
	sopscli.Require(t)
	k := sopscli.NewKey(t)
	enc := sopscli.Encrypt(t, "secret.yaml", []byte(secretYAML), sopscli.Options{}, k.Recipient)
	_, err := sopsdecrypt.Parse(sopsdecrypt.YAML, enc)
	if !errors.Is(err, sopsdecrypt.ErrUnsupported) || !strings.Contains(err.Error(), "encrypted_regex") {
		t.Fatalf("Parse of a wholly encrypted manifest: %v, want ErrUnsupported with a hint", err)
	}
}

func TestParseIgnoresPlainFiles(t *testing.T) {
	for _, tc := range []struct {
		f    sopsdecrypt.Format
		data string
	}{
		{sopsdecrypt.YAML, secretYAML},
		{sopsdecrypt.YAML, "sops: 1\nmac: 2\n"},
		{sopsdecrypt.YAML, "a: [unclosed\nsops: mac\n"},
		{sopsdecrypt.YAML, "a: 1\n---\nsops: {mac: x}\n---\n{{ .Values.sops.mac }}: [\n"},
		{sopsdecrypt.JSON, `{"sops": "mac"}`},
		{sopsdecrypt.JSON, `not json sops mac`},
		{sopsdecrypt.Dotenv, secretEnv},
		{sopsdecrypt.Binary, secretBinary},
	} {
		doc, err := sopsdecrypt.Parse(tc.f, []byte(tc.data))
		if doc != nil || err != nil {
			t.Errorf("Parse(%v, %q) = %v, %v; want nil, nil", tc.f, tc.data, doc, err)
		}
	}
}

func TestParseIdentities(t *testing.T) {
	k := sopscli.NewKey(t)
	if len(k.Identities) != 1 {
		t.Fatalf("want one identity, got %d", len(k.Identities))
	}
	if err := sopsdecrypt.ParseRecipient(k.Recipient); err != nil {
		t.Errorf("ParseRecipient(%s): %v", k.Recipient, err)
	}
	if ids, err := sopsdecrypt.ParseIdentities([]byte("  \n")); err != nil || ids != nil {
		t.Errorf("empty key = %v, %v; want none", ids, err)
	}
	bad := "AGE-SECRET-KEY-1" + strings.Repeat("Q", 20)
	if _, err := sopsdecrypt.ParseIdentities([]byte(bad)); err == nil || strings.Contains(err.Error(), bad) {
		t.Errorf("bad key: error %v (must fail without quoting the key)", err)
	}
	if err := sopsdecrypt.ParseRecipient("age1nope"); err == nil {
		t.Error("ParseRecipient accepted age1nope")
	}
}
