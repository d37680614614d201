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

// FailureOf says how err is reported: with the reason and stalled-ness of
// the outermost Failure in its chain (the innermost code that failed may be
// overruled by a caller that knows more), else unstalled with fallback as
// the reason; its Err is err itself, so its text keeps all of err's context.
func FailureOf(err error, fallback string) *Failure {
	f, ok := errors.AsType[*Failure](err)
	switch {
	case !ok:
		return &Failure{Reason: fallback, Err: err}
	case error(f) == err:
		return f
	}
	return &Failure{Reason: f.Reason, Stalled: f.Stalled, Err: err}
}
