package redact

import (
	"errors"
	"strings"
	"testing"
)

func TestScrubber(t *testing.T) {
	s := New("hunter2-token", "", "abc", "  s3cr3t  ")
	tests := []struct{ in, want string }{
		{"fetch https://user:hunter2-token@git.example.com/f.git: 401", "fetch https://" + Mask + "@git.example.com/f.git: 401"},
		{"ssh://git@example.com/f.git refused", "ssh://" + Mask + "@example.com/f.git refused"},
		{"token hunter2-token rejected", "token " + Mask + " rejected"},
		{"password s3cr3t", "password " + Mask},
		{"the s3cr3t is out", "the " + Mask + " is out"},
		{"abc is too short to be scrubbed", "abc is too short to be scrubbed"},
		{"plain message", "plain message"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := s.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := (Scrubber{}).String("https://user:hunter2-token@git.example.com"); got != "https://user:"+Mask+"@git.example.com" {
		t.Errorf("the zero Scrubber (status documents) = %q, want Text's user:password masking only", got)
	}
	if s.Error(nil) != "" {
		t.Error("a nil error must scrub to empty")
	}
	if got := s.Error(errors.New("bad hunter2-token")); got != "bad "+Mask {
		t.Errorf("Error = %q", got)
	}
}

func TestScrubberBoundsLength(t *testing.T) {
	for _, n := range []int{MaxLength, 100 * MaxLength} {
		got := Scrubber{}.String(strings.Repeat("é", n))
		if len(got) > MaxLength {
			t.Fatalf("%d bytes kept, more than %d", len(got), MaxLength)
		}
		if !strings.HasSuffix(got, "(truncated)") || !strings.HasPrefix(got, "éé") {
			t.Errorf("bad cut: …%s", got[len(got)-30:])
		}
	}
	if got := Truncate("short", 10); got != "short" {
		t.Errorf("Truncate cut a short message: %q", got)
	}
	if got := Truncate("ééééé", 3); got != "é" {
		t.Errorf("Truncate below the mark's length = %q, want the whole runes that fit", got)
	}
}

// TestValues: the longest value first, so one holding another is masked
// whole; values under four bytes are left.
func TestValues(t *testing.T) {
	tests := []struct {
		msg    string
		values []string
		want   string
	}{
		{"token abcd1234 and abcd", []string{"abcd", "abcd1234"}, "token " + Mask + " and " + Mask},
		{"pw ab", []string{"ab"}, "pw ab"},
		{"none here", nil, "none here"},
	}
	for _, tt := range tests {
		if got := Values(tt.msg, tt.values); got != tt.want {
			t.Errorf("Values(%q, %q) = %q, want %q", tt.msg, tt.values, got, tt.want)
		}
	}
}
