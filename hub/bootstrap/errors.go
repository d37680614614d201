package bootstrap

import "errors"

// Error classes; test with errors.Is.
var (
	// ErrNotEmpty: a destination directory holds files and Force was not set.
	ErrNotEmpty = errors.New("directory is not empty")
	// ErrClusterExists: the cluster is already registered and Force was
	// not set.
	ErrClusterExists = errors.New("cluster already registered")
	// ErrInvalidOption: an option value is unusable (a name that is not a
	// DNS label, a repo URL with credentials in it, …).
	ErrInvalidOption = errors.New("invalid option")
)
