package redact

import (
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Mask replaces whatever is removed.
const Mask = "[REDACTED]"

// MaxLength bounds a message kept for logs or status (bytes); a longer one
// is cut at a UTF-8 boundary and marked.
const MaxLength = 2048

// anyUserinfo is a URL's user name and password, whatever they are.
var anyUserinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@`)

// minSecret: shorter secret values are not scrubbed (they would
// mangle ordinary words and protect nothing).
const minSecret = 4

// Scrubber removes what Text removes and bounds the length; one made by
// New also removes the secret values a process was configured with and
// the whole userinfo of every URL (a token is often passed as the user
// name, and an agent's logs need no user name). The zero value, Text and
// the bound only, is what status documents get.
type Scrubber struct {
	secrets  []string
	userinfo bool
}

// New returns a Scrubber for these configured secret values; blank and
// very short ones are ignored.
func New(secrets ...string) Scrubber {
	s := Scrubber{userinfo: true}
	for _, v := range secrets {
		v = strings.TrimSpace(v)
		if len(v) >= minSecret {
			s.secrets = append(s.secrets, v)
		}
	}
	return s
}

// String is msg scrubbed and bounded.
func (s Scrubber) String(msg string) string {
	if msg == "" {
		return msg
	}
	// Cut first too: redaction is linear, but a megabyte-long error (a
	// manifest dump) need not be scanned to keep 2 KiB of it.
	if len(msg) > 16*MaxLength {
		msg = msg[:16*MaxLength]
	}
	msg = Values(msg, s.secrets)
	if s.userinfo {
		msg = anyUserinfo.ReplaceAllString(msg, "${1}"+Mask+"@")
	}
	return Truncate(Text(msg), MaxLength)
}

// Values is msg with every one of values replaced by Mask, the longest
// first, so that a value holding another is masked whole. Values shorter
// than four bytes are not masked: masking them everywhere would garble the
// message and protect nothing (a caller that must not show them drops the
// message instead).
func Values(msg string, values []string) string {
	sorted := make([]string, 0, len(values))
	for _, v := range values {
		if len(v) >= minSecret {
			sorted = append(sorted, v)
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool { return len(sorted[i]) > len(sorted[j]) })
	for _, v := range sorted {
		msg = strings.ReplaceAll(msg, v, Mask)
	}
	return msg
}

// Error is err's message scrubbed and bounded; "" for nil.
func (s Scrubber) Error(err error) string {
	if err == nil {
		return ""
	}
	return s.String(err.Error())
}

// Truncate cuts msg to at most max bytes at a rune boundary, marking the
// cut.
func Truncate(msg string, max int) string {
	if len(msg) <= max {
		return msg
	}
	mark := "… (truncated)"
	if max < len(mark) {
		mark = "" // no room to say so
	}
	cut := max - len(mark)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + mark
}
