package redact

import (
	"regexp"
	"strings"
)

var (
	pemBlock    = regexp.MustCompile(`-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?(?:-----END [A-Z0-9 ]+-----|$)`)
	urlUserinfo = regexp.MustCompile(`\b([A-Za-z][A-Za-z0-9+.-]*://)([^/\s:@]+):([^/\s@]+)@`)
	// dataField is an error clause about a Secret's payload field
	// (".data.token: expected string, got …", "data[k]: Invalid value: …"):
	// the rest of the clause may quote the value, so it goes.
	dataField  = regexp.MustCompile(`((?:^|[\s("'])\.?(?:data|stringData|binaryData)(?:\.[A-Za-z0-9_.-]+|\[[^\]\n]*\])"?:)[^;\n]*`)
	credential = regexp.MustCompile(`(?i)\b(password|passwd|pwd|token|bearertoken|apikey|api[_-]key|secret[_-]?key|client[_-]?secret|private[_-]?key|access[_-]?key)("?\s*[:=]\s*)(\[REDACTED\]|"(?:[^"\\]|\\.)*"|'[^']*'|[^\s,;}\]&"'\[]+)`)
	// dataKey finds a Secret's payload keys. A quoted key (JSON) or
	// stringData/binaryData is redacted whatever follows; a bare `data:`
	// only when a map or a YAML block follows, since "data:" is also
	// ordinary prose ("failed to read data: EOF").
	dataKey     = regexp.MustCompile(`(^|[^A-Za-z0-9_]|\\[nt])("?)(data|stringData|binaryData)("?)([ \t]*[:=][ \t]*)`)
	base64Token = regexp.MustCompile(`[A-Za-z0-9+/_-]{16,}={0,2}`)
)

// Text removes from a message anything that may be Secret data, so that
// it can be logged or committed to Git: PEM blocks, passwords in URLs, the values of
// Secret data/stringData/binaryData (JSON, YAML blocks, Go maps), the rest
// of an error clause about such a field (".data.k: expected string, got …",
// "data[k]: Invalid value: …"),
// credential-looking key=value pairs, and base64-looking blobs of 16
// characters or more. It errs on removing too much. agent/apply already masks
// Secret values in its errors; this is the last line before logs and Git, for
// every message from any source (render errors print manifests too).
func Text(msg string) string {
	if msg == "" {
		return msg
	}
	msg = pemBlock.ReplaceAllString(msg, "-----BEGIN $1-----"+Mask+"-----END $1-----")
	msg = urlUserinfo.ReplaceAllString(msg, "$1$2:"+Mask+"@")
	msg = dataField.ReplaceAllString(msg, "$1 "+Mask)
	msg = redactDataValues(msg, "\n")
	msg = redactDataValues(msg, `\n`) // a manifest quoted inside a message
	msg = credential.ReplaceAllString(msg, "$1$2"+Mask)
	msg = base64Token.ReplaceAllStringFunc(msg, func(tok string) string {
		if looksLikeBase64(tok) {
			return Mask
		}
		return tok
	})
	return msg
}

// redactDataValues removes the values of data-like keys, with sep as the
// line separator.
func redactDataValues(msg, sep string) string {
	var b strings.Builder
	for {
		loc := dataKey.FindStringSubmatchIndex(msg)
		if loc == nil {
			b.WriteString(msg)
			return b.String()
		}
		valueStart := loc[1]
		quoted := loc[5] > loc[4] && loc[9] > loc[8]
		key := msg[loc[6]:loc[7]]
		end, ok := dataValueEnd(msg, valueStart, sep, quoted || key != "data")
		if !ok {
			b.WriteString(msg[:valueStart])
			msg = msg[valueStart:]
			continue
		}
		b.WriteString(msg[:valueStart])
		b.WriteString(Mask)
		msg = msg[end:]
	}
}

// dataValueEnd returns where the value starting at i ends, and whether it
// is one to redact.
func dataValueEnd(s string, i int, sep string, scalarToo bool) (int, bool) {
	rest := s[i:]
	switch {
	case strings.HasPrefix(rest, "{"), strings.HasPrefix(rest, "["):
		return i + balancedEnd(rest), true
	case strings.HasPrefix(rest, "map["):
		return i + 3 + balancedEnd(rest[3:]), true
	case strings.HasPrefix(rest, sep), strings.HasPrefix(rest, "\r"+sep):
		end := blockEnd(s, i, sep)
		return end, end > i+len(sep)+1
	case scalarToo:
		j := strings.IndexAny(rest, ",;}]\r\n")
		if k := strings.Index(rest, sep); k >= 0 && (j < 0 || k < j) {
			j = k
		}
		if j < 0 {
			return len(s), true
		}
		if j == 0 {
			return i, false
		}
		return i + j, true
	}
	return i, false
}

// balancedEnd returns the index just past the bracket that closes s[0],
// skipping quoted strings; len(s) when it is never closed.
func balancedEnd(s string) int {
	depth := 0
	inQuote := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inQuote {
			switch c {
			case '\\':
				i++
			case '"':
				inQuote = false
			}
			continue
		}
		switch c {
		case '"':
			inQuote = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(s)
}

// blockEnd returns where the YAML block that starts after the key ending
// at i ends: the lines indented deeper than the key's line (or list items
// at its depth) belong to it.
func blockEnd(s string, i int, sep string) int {
	lineStart := strings.LastIndex(s[:i], sep)
	if lineStart < 0 {
		lineStart = 0
	} else {
		lineStart += len(sep)
	}
	keyIndent := indentOf(s[lineStart:])
	pos := i
	if strings.HasPrefix(s[pos:], "\r") {
		pos++
	}
	for strings.HasPrefix(s[pos:], sep) {
		next := pos + len(sep)
		line := s[next:]
		if k := strings.Index(line, sep); k >= 0 {
			line = line[:k]
		}
		trimmed := strings.TrimSpace(line)
		ind := indentOf(line)
		if trimmed != "" && !(ind > keyIndent || (ind == keyIndent && strings.HasPrefix(trimmed, "- "))) {
			break
		}
		pos = next + len(line)
	}
	return pos
}

func indentOf(line string) int {
	return len(line) - len(strings.TrimLeft(line, " \t"))
}

// looksLikeBase64 tells encoded data from identifiers, paths and hashes:
// base64 of anything mixes cases and digits and changes character class
// at almost every other character, which words and names do not.
func looksLikeBase64(tok string) bool {
	body := strings.TrimRight(tok, "=")
	if len(body) < 16 {
		return false
	}
	hexOnly := true
	var upper, lower, digit, transitions int
	prev := -1
	for _, r := range body {
		class := 3
		switch {
		case r >= 'A' && r <= 'Z':
			class = 0
			upper++
			hexOnly = false
		case r >= 'a' && r <= 'z':
			class = 1
			lower++
			if r > 'f' {
				hexOnly = false
			}
		case r >= '0' && r <= '9':
			class = 2
			digit++
		default:
			hexOnly = false
		}
		if prev >= 0 && class != prev {
			transitions++
		}
		prev = class
	}
	if hexOnly {
		return false // commit and content hashes
	}
	if len(body) != len(tok) && upper+lower > 0 {
		return true // "=" padding: nothing but base64 ends like that
	}
	return upper >= 2 && lower >= 2 && digit >= 1 && float64(transitions) >= 0.4*float64(len(body)-1)
}
