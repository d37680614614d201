package sopsdecrypt

import (
	"bytes"
	"errors"
	"testing"
)

const fuzzENC = "ENC[AES256_GCM,data:3q2+7w==,iv:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=,tag:AAAAAAAAAAAAAAAAAAAAAA==,type:str]"

// FuzzParse: Parse never panics on any input in any format; a document it
// accepts redacts without a ciphertext left in a value, and decrypting it with
// a wrong data key fails with a classified error (never a panic, never
// output).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: Secret\nmetadata: {name: a}\nstringData:\n  k: " + fuzzENC + "\nsops:\n  mac: " + fuzzENC + "\n  lastmodified: \"2024-01-01T00:00:00Z\"\n  age: [{recipient: age1x, enc: y}]\n",
		"a: &x [1, 2]\nb: *x\nc: {d: " + fuzzENC + "}\nsops: {mac: m, version: 3.9.0}\n---\ne: null\nsops: {mac: m}\n",
		`{"data": "` + fuzzENC + `", "sops": {"mac": "` + fuzzENC + `", "lastmodified": "2024-01-01T00:00:00Z"}}`,
		`{"a": [1, 2.5, true, null, {"b": "` + fuzzENC + `"}], "sops": {"mac": "x", "mac_only_encrypted": true}}`,
		"A=" + fuzzENC + "\n#comment\nB=plain\\nline\nsops_mac=" + fuzzENC + "\nsops_lastmodified=2024-01-01T00:00:00Z\nsops_age__list_0__map_recipient=age1x\n",
	} {
		for format := range 4 {
			f.Add([]byte(s), uint8(format))
		}
	}
	key := bytes.Repeat([]byte{7}, 32)
	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		if len(data) > 32<<10 {
			return
		}
		doc, err := Parse(Format(format%4), data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if doc == nil {
			return
		}
		// Keys are never encrypted; no value may stay a ciphertext.
		doc.redact().doc.mapLeaves(func(v any, p []string) (any, error) {
			if s, ok := v.(string); ok && isEncrypted(s) {
				t.Fatalf("redacted document keeps the ciphertext at %q", p)
			}
			return v, nil
		})
		if _, err := doc.Redacted(); err != nil {
			t.Fatalf("Redacted: %v", err)
		}
		out, err := doc.decryptWithKey(key)
		if err == nil {
			// Only a document with no encrypted value and a MAC that
			// decrypts under this key could pass; a fuzzer cannot forge that.
			t.Fatalf("decrypted with a wrong key:\n%s", out)
		}
		if out != nil {
			t.Fatal("output with an error")
		}
		if doc.Recipients() == nil {
			t.Fatal("Recipients is nil")
		}
	})
}
