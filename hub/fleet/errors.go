package fleet

import (
	"errors"
	"fmt"
	"strings"
)

// Error classes, for errors.Is on a *FieldError or an ErrorList.
var (
	ErrUnknownField      = errors.New("unknown field")
	ErrInvalidValue      = errors.New("invalid value")
	ErrRequired          = errors.New("required field missing")
	ErrDuplicate         = errors.New("duplicate name")
	ErrDanglingReference = errors.New("reference to a missing object")
	ErrDependencyCycle   = errors.New("dependency cycle")
	ErrSyntax            = errors.New("syntax error")
	ErrNoMatch           = errors.New("selector matches no cluster")
)

// FieldError is one problem in one document, located by file, line and the
// field's path (e.g. spec.syncPolicies[1].destination.fleet).
type FieldError struct {
	File   string
	Line   int
	Field  string
	Kind   error // one of the Err* classes
	Detail string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	fmt.Fprintf(&b, ": %v", e.Kind)
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	}
	return b.String()
}

func (e *FieldError) Unwrap() error { return e.Kind }

// ErrorList is every problem found in a repo, sorted by file and line.
type ErrorList []*FieldError

func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap lets errors.Is/As see every entry.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}
