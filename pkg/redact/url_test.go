package redact

import "testing"

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:hunter2@git.example.com/fleet.git": "https://git.example.com/fleet.git",
		"https://ghp_token@github.com/o/r":               "https://github.com/o/r",
		"ssh://git:pw@example.com/f.git":                 "ssh://git@example.com/f.git",
		"ssh://git@example.com/f.git":                    "ssh://git@example.com/f.git",
		"https://git.example.com/fleet.git":              "https://git.example.com/fleet.git",
		"git@example.com:org/fleet.git":                  "git@example.com:org/fleet.git",
		"::not a url":                                    "::not a url",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}
