package testkeys

import (
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
)

func TestKeysParse(t *testing.T) {
	keys := map[string]Key{
		"ssh": SSH(t, "alice@example.com"), "rsa": RSA(t, "bob"), "seeded": SSHSeeded(t, 3, ""), "pgp": PGP(t, "Carol"),
	}
	for name, k := range keys {
		if _, err := signature.ParseKeyRing(map[string][]byte{name: []byte(k.Public)}); err != nil {
			t.Errorf("%s: public half does not parse as a trusted key: %v", name, err)
		}
	}
	if a, b := SSHSeeded(t, 3, ""), SSHSeeded(t, 3, ""); a.Public != b.Public || a.Line() == a.Public {
		t.Errorf("seeded keys differ or Line kept the newline: %q %q", a.Public, b.Public)
	}
	if a, b := SSH(t, "x"), SSH(t, "x"); a.Public == b.Public {
		t.Error("two fresh keys are the same")
	}
}
