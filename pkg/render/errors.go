package render

import (
	"context"
	"errors"
	"regexp"
	"strings"
)

// Error classes; test with errors.Is on the error Unit or chartvendor.VendorCharts returns.
var (
	// ErrPathEscape: a path (after cleaning) points outside the repository.
	ErrPathEscape = errors.New("path escapes the repository")
	// ErrSymlinkEscape: a symlink resolves to a location outside the repository.
	ErrSymlinkEscape = errors.New("symlink escapes the repository")
	// ErrTooLarge: a file, the rendered output, the object count or the Helm
	// worker's memory exceeded its limit.
	ErrTooLarge = errors.New("size limit exceeded")
	// ErrTimeout: rendering did not finish before the deadline.
	ErrTimeout = errors.New("render timed out")
	// ErrYAMLBomb: YAML aliases expand to far more nodes than the document holds.
	ErrYAMLBomb = errors.New("yaml alias expansion too large")
	// ErrInvalidObject: an object lacks apiVersion, kind or metadata.name, is
	// not a mapping, or is a duplicate.
	ErrInvalidObject = errors.New("invalid object")
	// ErrRemoteBase: a kustomization refers to a URL (git or http).
	ErrRemoteBase = errors.New("remote kustomize resources are disabled")
	// ErrPluginsDisabled: a kustomization uses an exec, Go or function plugin
	// or the helmCharts generator.
	ErrPluginsDisabled = errors.New("kustomize plugins are disabled")
	// ErrKustomize: krusty failed for another reason.
	ErrKustomize = errors.New("kustomize build failed")
	// ErrHelm: Helm failed to load or template the chart.
	ErrHelm = errors.New("helm template failed")
	// ErrChartNotFound: the chart repository has no version matching the range.
	ErrChartNotFound = errors.New("chart version not found")
	// ErrChartDigest: a downloaded chart does not match the index's digest.
	ErrChartDigest = errors.New("chart digest mismatch")
	// ErrChartRepo: the chart repository could not be read.
	ErrChartRepo = errors.New("chart repository error")
	// ErrChartAuth: an OCI registry refused the credentials (or their
	// absence) with 401 or 403.
	ErrChartAuth = errors.New("chart registry authentication failed")
	// ErrDecrypt: a SOPS document could not be decrypted (no matching age
	// key, a MAC mismatch, an unsupported or malformed document). The
	// error names the file and never its contents.
	ErrDecrypt = errors.New("sops decryption failed")
)

// Error is what Unit and chartvendor.VendorCharts return: the unit (empty from
// VendorCharts), the repo-relative file at fault when it is known (from
// VendorCharts, charts/<chart>), and the classified cause. Messages never
// carry object contents (see sanitize).
type Error struct {
	Unit string
	File string
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Unit != "" {
		b.WriteString("unit ")
		b.WriteString(e.Unit)
		b.WriteString(": ")
	}
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// classError carries a class and a sanitized detail, so the detail (from
// kustomize, Helm or the OS) never leaks through Unwrap into messages twice.
type classError struct {
	class  error
	detail string
	cause  error // optional, for errors.Is on e.g. context.DeadlineExceeded
}

func (e *classError) Error() string {
	if e.detail == "" {
		return e.class.Error()
	}
	return e.class.Error() + ": " + e.detail
}

func (e *classError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.class, e.cause}
	}
	return []error{e.class}
}

func classed(class error, detail string) error {
	return &classError{class: class, detail: sanitize(detail)}
}

// Classify is an error of class with detail sanitized as Unit's own
// errors are, for the hub-side packages under pkg/render (chart vendoring).
func Classify(class error, detail string) error { return classed(class, detail) }

// ClassifyCause is Classify keeping cause for errors.Is.
func ClassifyCause(class error, detail string, cause error) error {
	return &classError{class: class, detail: sanitize(detail), cause: cause}
}

// fileError is a classified error about one file, raised below Unit (in the
// filesystem, the scanner, the preflight) and lifted into *Error.File.
type fileError struct {
	file string // repo-relative, slash-separated
	err  error
}

func (e *fileError) Error() string { return e.file + ": " + e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

func errFile(file string, class error, detail string) error {
	return &fileError{file: file, err: classed(class, detail)}
}

// errFileCause is errFile keeping cause for errors.Is.
func errFileCause(file string, class error, detail string, cause error) error {
	return &fileError{file: file, err: &classError{class: class, detail: sanitize(detail), cause: cause}}
}

var (
	// Go's %v of maps and structs (kustomize prints objects like that) and
	// JSON/flow-style objects may hold Secret data: keep only the shape.
	// Innermost brackets are replaced first, so nesting collapses too.
	goMapRe    = regexp.MustCompile(`map\[[^\[\]{}]*\]`)
	goStructRe = regexp.MustCompile(`\{\{[^{}]*\}[^{}]*\}`)
	flowObjRe  = regexp.MustCompile(`\{[^{}]*:[^{}]*\}`)
	bracesRe   = regexp.MustCompile(`\{[^{}]*\}`)
	// A base64 run as long as a typical key or token.
	base64Re = regexp.MustCompile(`[A-Za-z0-9+/]{40,}={0,2}`)
	// A segment of a field path (JSON pointer) or a file path: a word in
	// camelCase or PascalCase, or an index. Random base64 is mixed case and
	// digits throughout, so a run made only of such segments is a path.
	pathSegmentRe = regexp.MustCompile(`^([A-Za-z][a-z]*([A-Z][a-z]+)*[0-9]*|[0-9]+)$`)
)

const (
	maxMessage = 600
	elided     = "\x00" // placeholder for a collapsed span while collapsing
)

// sanitize keeps an error message useful (file names, object ids, line
// numbers) while dropping what could be object content: everything after
// the first line (kustomize and Helm quote documents on later lines), Go
// map/struct dumps, flow-style objects and long base64 runs. It is best
// effort: a template's own `fail` message is kept as the chart wrote it.
func sanitize(msg string) string {
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = strings.TrimRight(msg[:i], " :") + " […]"
	}
	msg = strings.ReplaceAll(msg, elided, "")
	for range 16 {
		next := goMapRe.ReplaceAllString(msg, "map"+elided)
		next = goStructRe.ReplaceAllString(next, elided)
		next = flowObjRe.ReplaceAllString(next, elided)
		if next == msg {
			break
		}
		msg = next
	}
	// A struct dump whose inner braces collapsed: {{v1 } …} → {…}.
	for strings.Contains(msg, "{"+elided) || strings.Contains(msg, elided+"}") {
		next := bracesRe.ReplaceAllStringFunc(msg, func(m string) string {
			if strings.Contains(m, elided) {
				return elided
			}
			return m
		})
		if next == msg {
			break
		}
		msg = next
	}
	msg = strings.ReplaceAll(msg, "map"+elided, "map[…]")
	msg = strings.ReplaceAll(msg, elided, "{…}")
	msg = base64Re.ReplaceAllStringFunc(msg, func(m string) string {
		// Digests and commit ids are not secrets, and the path of a failing
		// JSON patch operation is what the reader needs to fix it.
		if isHex(m) || isPath(m) || isAgeRecipient(m) {
			return m
		}
		return "…"
	})
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "…"
	}
	return msg
}

var classes = []error{
	ErrPathEscape, ErrSymlinkEscape, ErrTooLarge, ErrTimeout, ErrYAMLBomb,
	ErrInvalidObject, ErrRemoteBase, ErrPluginsDisabled, ErrKustomize, ErrHelm,
	ErrChartNotFound, ErrChartDigest, ErrChartRepo, ErrChartAuth, ErrDecrypt,
}

// ensureClass gives an unclassified error (an OS error on the way, say)
// the class of the step it came from, keeping its file.
func ensureClass(err error, class error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	for _, c := range classes {
		if errors.Is(err, c) {
			return err
		}
	}
	var fe *fileError
	if errors.As(err, &fe) {
		return &fileError{file: fe.file, err: &classError{class: class, detail: sanitize(fe.err.Error()), cause: fe.err}}
	}
	return &classError{class: class, detail: sanitize(err.Error()), cause: err}
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// unitError lifts any error into *Error for unit u, taking the file from a
// fileError in the chain.
func unitError(unit string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		if e.Unit == "" {
			e.Unit = unit
		}
		return e
	}
	out := &Error{Unit: unit, Err: err}
	var fe *fileError
	if errors.As(err, &fe) {
		out.File = fe.file
		out.Err = fe.err
	}
	return out
}

// isPath reports whether a base64-alphabet run is a slash-separated path
// (/spec/template/spec/containers/0/resources) rather than encoded data.
func isPath(s string) bool {
	if strings.Count(s, "/") < 2 || strings.ContainsAny(s, "+=") {
		return false
	}
	for _, seg := range strings.Split(strings.TrimPrefix(s, "/"), "/") {
		if !pathSegmentRe.MatchString(seg) {
			return false
		}
	}
	return true
}

// isAgeRecipient reports whether a run is an age public key (age1 and
// bech32 characters): recipients are public, and naming them is how a
// decryption error says which cluster a file is encrypted for.
func isAgeRecipient(s string) bool {
	rest, ok := strings.CutPrefix(s, "age1")
	if !ok {
		return false
	}
	for _, c := range rest {
		if !strings.ContainsRune("qpzry9x8gf2tvdw0s3jn54khce6mua7l", c) {
			return false
		}
	}
	return true
}
