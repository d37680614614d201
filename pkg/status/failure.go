package status

import "errors"

// Failure is an error that knows how it is reported: the Ready=False
// reason it carries and whether it stalls (only a change in the fleet repo
// can fix it; otherwise a later cycle may succeed on its own). The package
// that fails chooses both, where it knows why, as source-controller's
// Stalling and Generic errors do; the agent reads them with FailureOf.
type Failure struct {
	Reason  string
	Stalled bool
	Err     error
}

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// Stalling marks err as a failure with reason that only a change in Git
// can fix. A nil err stays nil.
func Stalling(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &Failure{Reason: reason, Stalled: true, Err: err}
}

// Retrying marks err as a failure with reason that a later cycle may get
// past on its own. A nil err stays nil.
func Retrying(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &Failure{Reason: reason, Err: err}
}

// FailureOf is the outermost Failure in err's chain (the innermost code
// that failed may be overruled by its caller, which knows more), else an
// unstalled failure with fallback as its reason.
func FailureOf(err error, fallback string) *Failure {
	if f, ok := errors.AsType[*Failure](err); ok {
		return f
	}
	return &Failure{Reason: fallback, Err: err}
}
