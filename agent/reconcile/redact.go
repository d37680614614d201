package reconcile

import (
	"regexp"
	"strings"
)

// maxMessage bounds an error message kept for status.
const maxMessage = 1024

// minSecret: shorter secrets are not scrubbed (they would mangle ordinary
// words and protect nothing).
const minSecret = 4

var userinfoRe = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@`)

// redactor scrubs credentials out of messages before they reach logs or
// status: URL userinfo, and every configured secret value (Git password,
// token, key passphrase). render and apply already keep object contents
// and Secret data out of their errors.
type redactor struct {
	secrets []string
}

func newRedactor(secrets []string) redactor {
	var r redactor
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) >= minSecret {
			r.secrets = append(r.secrets, s)
		}
	}
	return r
}

func (r redactor) redact(msg string) string {
	msg = userinfoRe.ReplaceAllString(msg, "${1}***@")
	for _, s := range r.secrets {
		msg = strings.ReplaceAll(msg, s, "***")
	}
	if len(msg) > maxMessage {
		cut := maxMessage
		for cut > 0 && !isRuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + " […]"
	}
	return msg
}

func (r redactor) err(err error) string {
	if err == nil {
		return ""
	}
	return r.redact(err.Error())
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
