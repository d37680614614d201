package prereqs

import (
	"os/exec"
	"testing"
)

// debianPackages names the Debian package of each tool tests exec, for the
// failure message; tools/prereqs.sh holds the same table.
var debianPackages = map[string]string{
	"git":        "git",
	"gpg":        "gnupg",
	"gpgconf":    "gnupg",
	"ssh":        "openssh-client",
	"ssh-keygen": "openssh-client",
	"diff":       "diffutils",
	// The dashboard's browser test (test/dashboard) drives headless
	// Chromium.
	"chromium":     "chromium",
	"chromedriver": "chromium-driver",
}

// LookPath returns the path of the named tool, failing t when it is not on
// PATH.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s", Missing(name, err))
	}
	return p
}

// Require fails t unless every named tool is on PATH.
func Require(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		LookPath(t, n)
	}
}

// Missing is the message for a tool that is not installed.
func Missing(name string, err error) string {
	pkg := debianPackages[name]
	if pkg == "" {
		pkg = "see the README"
	}
	return name + " is missing (Debian package " + pkg + "): this test needs it; install the prerequisites " +
		"listed in README.md (tools/prereqs.sh checks them, tools/prereqs.sh --install installs them as root on Debian): " + err.Error()
}
