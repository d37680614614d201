package slice

import (
	"bytes"
	"strconv"
	"strings"
)

// plainWords are scalars a YAML 1.1 or 1.2 parser would not read back as a
// string.
var plainWords = map[string]bool{
	"y": true, "n": true, "yes": true, "no": true, "true": true, "false": true,
	"on": true, "off": true, "null": true, "~": true,
}

// QuoteScalar returns s as a YAML scalar: plain when that is unambiguous
// (names, paths, durations, hashes), else double-quoted.
func QuoteScalar(s string) string {
	if isPlainSafe(s) {
		return s
	}
	// Go's quoted form uses only escapes YAML double-quoted scalars accept.
	return strconv.Quote(s)
}

func isPlainSafe(s string) bool {
	if s == "" || plainWords[strings.ToLower(s)] {
		return false
	}
	switch c := s[0]; {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '/':
	case c == '.':
		// Relative paths; not .inf, .nan or ".5".
		if !strings.HasPrefix(s, "./") && !strings.HasPrefix(s, "../") {
			return false
		}
	case c >= '0' && c <= '9':
		return isPlainSafeNumberLike(s)
	default:
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_', c == '/', c == '.', c == '-':
		case c == ':' && i+1 < len(s) && s[i+1] != ' ':
		default:
			return false
		}
	}
	return true
}

// isPlainSafeNumberLike accepts strings that start with a digit but no YAML
// 1.1 or 1.2 parser reads as a number, date or time: quantities and
// durations such as 256Mi, 10m or 5m0s. Only letters, digits and dots, at
// least one letter that cannot belong to a number (not e, x, o or b), and
// no radix prefix.
func isPlainSafeNumberLike(s string) bool {
	if len(s) > 1 && s[0] == '0' && strings.ContainsRune("xXoObB", rune(s[1])) {
		return false
	}
	letter := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c == '.':
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			if !strings.ContainsRune("eExXoObB", rune(c)) {
				letter = true
			}
		default:
			return false
		}
	}
	return letter
}

// Marshal writes slice.yaml: the generated header, then the fields in the
// order of the Slice and Unit types. It is written by hand, like the
// compiler's other generated files, because a reflective YAML library
// dominates the compile time at fleet scale; Parse reads it back equal.
func Marshal(s *Slice) []byte {
	var b bytes.Buffer
	b.Grow(160 + 300*len(s.Units))
	b.WriteString(GeneratedHeader)
	b.WriteString("\napiVersion: ")
	b.WriteString(QuoteScalar(s.APIVersion))
	b.WriteString("\nkind: ")
	b.WriteString(QuoteScalar(s.Kind))
	b.WriteString("\ncluster: ")
	b.WriteString(QuoteScalar(s.Cluster))
	if s.Decommission {
		b.WriteString("\ndecommission: true")
	}
	if len(s.Units) == 0 {
		b.WriteString("\nunits: []\n")
		return b.Bytes()
	}
	b.WriteString("\nunits:\n")
	for i := range s.Units {
		u := &s.Units[i]
		b.WriteString("- name: ")
		b.WriteString(QuoteScalar(u.Name))
		b.WriteString("\n  kind: ")
		b.WriteString(QuoteScalar(string(u.Kind)))
		b.WriteString("\n  path: ")
		b.WriteString(QuoteScalar(u.Path))
		b.WriteByte('\n')
		if u.Helm != nil {
			b.WriteString("  helm:\n    chart: ")
			b.WriteString(QuoteScalar(u.Helm.Chart))
			b.WriteString("\n    releaseName: ")
			b.WriteString(QuoteScalar(u.Helm.ReleaseName))
			b.WriteString("\n    values: ")
			b.WriteString(QuoteScalar(u.Helm.Values))
			b.WriteByte('\n')
		}
		if len(u.DependsOn) > 0 {
			b.WriteString("  dependsOn:\n")
			for _, d := range u.DependsOn {
				b.WriteString("  - ")
				b.WriteString(QuoteScalar(d))
				b.WriteByte('\n')
			}
		}
		b.WriteString("  prune: ")
		b.WriteString(strconv.FormatBool(u.Prune))
		if u.AllowEmpty {
			b.WriteString("\n  allowEmpty: true")
		}
		b.WriteString("\n  wait: ")
		b.WriteString(strconv.FormatBool(u.Wait))
		if u.Suspend {
			b.WriteString("\n  suspend: true")
		}
		b.WriteString("\n  timeout: ")
		b.WriteString(QuoteScalar(u.Timeout.Duration.String()))
		if u.WaitForTimeout {
			b.WriteString("\n  waitForTimeout: true")
		}
		if len(u.HealthChecks) > 0 {
			b.WriteString("\n  healthChecks:")
			for _, hc := range u.HealthChecks {
				b.WriteString("\n  - apiVersion: ")
				b.WriteString(QuoteScalar(hc.APIVersion))
				for _, f := range [...]struct{ name, value string }{
					{"kind", hc.Kind}, {"current", hc.Current}, {"inProgress", hc.InProgress}, {"failed", hc.Failed},
				} {
					if f.value != "" {
						b.WriteString("\n    " + f.name + ": ")
						b.WriteString(QuoteScalar(f.value))
					}
				}
			}
		}
		if u.Namespace != "" {
			b.WriteString("\n  namespace: ")
			b.WriteString(QuoteScalar(u.Namespace))
		}
		b.WriteString("\n  hash: ")
		b.WriteString(QuoteScalar(u.Hash))
		if len(u.Inputs) > 0 {
			b.WriteString("\n  inputs:")
			for _, in := range u.Inputs {
				b.WriteString("\n  - path: ")
				b.WriteString(QuoteScalar(in.Path))
				if in.Except != "" {
					b.WriteString("\n    except: ")
					b.WriteString(QuoteScalar(in.Except))
				}
			}
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}
