package render

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/pkg/render/sopsdecrypt"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/sopscli"
)

// sopsWord is in every plaintext; no hub render or error may contain it.
const sopsWord = "s3cr3t-plaintext-value"

const sopsSecretYAML = `apiVersion: v1
kind: Secret
metadata:
  name: db
type: Opaque
stringData:
  password: ` + sopsWord + `
`

const sopsConfigJSON = `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "api"}, "data": {"token": "` +
	"czNjcjN0LXBsYWludGV4dC12YWx1ZQ==" + `"}}
`

const sopsKustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: app
labels:
- pairs:
    team: payments
resources:
- db.enc.yaml
- api.enc.json
secretGenerator:
- name: env
  envs: [app.env]
- name: tls
  files: [tls.crt]
generatorOptions:
  disableNameSuffixHash: true
`

type sopsFixture struct {
	root string
	unit slice.Unit
}

// newSopsFixture writes a unit whose manifests and secretGenerator inputs
// are encrypted by the real sops CLI for recipient.
func newSopsFixture(t *testing.T, recipients ...string) sopsFixture {
	t.Helper()
	sopscli.Require(t)
	root := t.TempDir()
	dir := filepath.Join(root, "rendered", "c1", "secrets")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	regex := sopscli.Options{EncryptedRegex: "^(data|stringData)$"}
	files := map[string][]byte{
		"kustomization.yaml": []byte(sopsKustomization),
		"db.enc.yaml":        sopscli.Encrypt(t, "db.enc.yaml", []byte(sopsSecretYAML), regex, recipients...),
		"api.enc.json":       sopscli.Encrypt(t, "api.enc.json", []byte(sopsConfigJSON), regex, recipients...),
		"app.env":            sopscli.Encrypt(t, "app.env", []byte("USER=admin\nPASSWORD="+sopsWord+"\n"), sopscli.Options{}, recipients...),
		"tls.crt":            sopscli.Encrypt(t, "tls.crt", []byte("-----BEGIN-----\n"+sopsWord+"\n"), sopscli.Options{}, recipients...),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return sopsFixture{root: root, unit: unitAt("secrets", slice.UnitKustomize, "rendered/c1/secrets")}
}

type staticKeys []age.Identity

func (k staticKeys) load(context.Context) ([]age.Identity, error) { return k, nil }

func keyring(ids []age.Identity) Decryptor {
	return &sopsdecrypt.Keyring{Load: staticKeys(ids).load}
}

func TestUnitSOPSDecrypts(t *testing.T) {
	k := sopscli.NewKey(t)
	fx := newSopsFixture(t, k.Recipient)
	res, err := Unit(context.Background(), fx.root, fx.unit, Options{Decryptor: keyring(k.Identities)})
	if err != nil {
		t.Fatalf("Unit: %v", err)
	}
	wantFiles := []string{"rendered/c1/secrets/api.enc.json", "rendered/c1/secrets/app.env", "rendered/c1/secrets/db.enc.yaml", "rendered/c1/secrets/tls.crt"}
	if strings.Join(res.Encrypted, ",") != strings.Join(wantFiles, ",") {
		t.Errorf("Encrypted = %v, want %v", res.Encrypted, wantFiles)
	}
	db := find(t, res.Objects, "Secret", "db")
	// kustomize's transformers ran on the plaintext: the MAC held.
	wantString(t, db, sopsWord, "stringData", "password")
	wantString(t, db, "app", "metadata", "namespace")
	wantString(t, db, "payments", "metadata", "labels", "team")
	if _, ok := db.Object["sops"]; ok {
		t.Error("the sops metadata reached the object")
	}
	wantString(t, find(t, res.Objects, "Secret", "api"), base64.StdEncoding.EncodeToString([]byte(sopsWord)), "data", "token")
	wantString(t, find(t, res.Objects, "Secret", "env"), base64.StdEncoding.EncodeToString([]byte(sopsWord)), "data", "PASSWORD")
	wantString(t, find(t, res.Objects, "Secret", "env"), base64.StdEncoding.EncodeToString([]byte("admin")), "data", "USER")
	if env := find(t, res.Objects, "Secret", "env"); len(env.Object["data"].(map[string]any)) != 2 {
		t.Errorf("env Secret keys = %v, want USER and PASSWORD only", env.Object["data"])
	}
	wantString(t, find(t, res.Objects, "Secret", "tls"), base64.StdEncoding.EncodeToString([]byte("-----BEGIN-----\n"+sopsWord+"\n")), "data", "tls.crt")
}

// TestUnitSOPSRedacted is the hub's render: no key, every Secret present
// with its keys, values replaced by markers, no plaintext anywhere.
func TestUnitSOPSRedacted(t *testing.T) {
	fx := newSopsFixture(t, sopscli.NewKey(t).Recipient)
	res, err := Unit(context.Background(), fx.root, fx.unit, Options{})
	if err != nil {
		t.Fatalf("Unit: %v", err)
	}
	y, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(y, []byte(sopsWord)) || bytes.Contains(y, []byte(base64.StdEncoding.EncodeToString([]byte(sopsWord)))) || bytes.Contains(y, []byte("ENC[")) {
		t.Fatalf("the hub's render carries plaintext or ciphertext:\n%s", y)
	}
	if len(res.Encrypted) != 4 {
		t.Errorf("Encrypted = %v, want the 4 SOPS files", res.Encrypted)
	}
	db := find(t, res.Objects, "Secret", "db")
	if v, _, _ := unstructured.NestedString(db.Object, "stringData", "password"); !strings.HasPrefix(v, sopsdecrypt.RedactedPrefix) {
		t.Errorf("db password = %q, want a redaction marker", v)
	}
	wantString(t, db, "app", "metadata", "namespace")
	env := find(t, res.Objects, "Secret", "env")
	v, _, _ := unstructured.NestedString(env.Object, "data", "PASSWORD")
	if dec, _ := base64.StdEncoding.DecodeString(v); !strings.HasPrefix(string(dec), sopsdecrypt.RedactedPrefix) {
		t.Errorf("env PASSWORD decodes to %q, want a redaction marker", dec)
	}
	if data := env.Object["data"].(map[string]any); len(data) != 2 {
		t.Errorf("env Secret keys = %v, want USER and PASSWORD (no sops_ keys)", data)
	}
	find(t, res.Objects, "Secret", "tls")
	find(t, res.Objects, "Secret", "api")
}

// TestUnitSOPSFailures: a file for another cluster, a tampered file and a
// cluster without a key fail with ErrDecrypt naming the file, and never
// carry the plaintext.
func TestUnitSOPSFailures(t *testing.T) {
	mine := sopscli.NewKey(t).Identities
	other := sopscli.NewKey(t).Recipient
	ownKey := sopscli.NewKey(t)
	ownIDs, own := ownKey.Identities, ownKey.Recipient
	for _, tc := range []struct {
		name     string
		ids      []age.Identity
		recips   []string
		tamper   string // file to alter
		edit     func([]byte) []byte
		wantFile string
		says     string
	}{
		{name: "encrypted for another cluster", ids: mine, recips: []string{other}, says: other},
		{name: "cluster without a key", ids: nil, recips: []string{other}, says: "no age key"},
		{name: "tampered ciphertext", ids: ownIDs, recips: []string{own}, tamper: "db.enc.yaml", edit: flipCiphertext,
			wantFile: "rendered/c1/secrets/db.enc.yaml", says: "stringData.password"},
		{name: "tampered clear value", ids: ownIDs, recips: []string{own}, tamper: "db.enc.yaml",
			edit:     func(b []byte) []byte { return bytes.Replace(b, []byte("name: db"), []byte("name: dc"), 1) },
			wantFile: "rendered/c1/secrets/db.enc.yaml", says: "modified after it was encrypted"},
		{name: "tampered dotenv", ids: ownIDs, recips: []string{own}, tamper: "app.env", edit: flipCiphertext, wantFile: "rendered/c1/secrets/app.env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newSopsFixture(t, tc.recips...)
			if tc.tamper != "" {
				p := filepath.Join(fx.root, "rendered/c1/secrets", tc.tamper)
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, tc.edit(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Unit(context.Background(), fx.root, fx.unit, Options{Decryptor: keyring(tc.ids)})
			if !errors.Is(err, ErrDecrypt) {
				t.Fatalf("Unit error = %v, want ErrDecrypt", err)
			}
			var re *Error
			if !errors.As(err, &re) || re.File == "" || !strings.HasPrefix(re.File, "rendered/c1/secrets/") {
				t.Fatalf("error %v names no file of the unit", err)
			}
			if tc.wantFile != "" && re.File != tc.wantFile {
				t.Errorf("File = %s, want %s", re.File, tc.wantFile)
			}
			if tc.says != "" && !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if strings.Contains(err.Error(), sopsWord) {
				t.Errorf("error leaks the plaintext: %v", err)
			}
		})
	}
}

// flipCiphertext alters the first character of the first encrypted value.
func flipCiphertext(data []byte) []byte {
	data = bytes.Clone(data)
	i := bytes.Index(data, []byte("AES256_GCM,data:")) + len("AES256_GCM,data:")
	if data[i] == 'A' {
		data[i] = 'B'
	} else {
		data[i] = 'A'
	}
	return data
}
