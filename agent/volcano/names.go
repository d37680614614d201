package volcano

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Errors, for errors.Is.
var (
	// ErrNotInstalled: the cluster does not serve Volcano's APIs.
	//lint:ignore ST1005 Volcano is a proper name and starts the sentence users see in status
	ErrNotInstalled = errors.New("Volcano is not installed on this cluster")
	// ErrNotOwned: a job of the unit's name exists that Flotilla did not
	// create for this unit; it is left alone.
	ErrNotOwned = errors.New("job not created by flotilla")
	// ErrInvalidUnit: a job unit must render exactly one Volcano Job.
	ErrInvalidUnit = errors.New("invalid Volcano job unit")
)

// Annotations on Volcano Jobs.
const (
	// AnnotationSpecHash is the rendered job's spec hash, set when the agent
	// creates the job.
	AnnotationSpecHash = "flotilla.dev/spec-hash"
	// AnnotationRecreate ("true") on a rendered job asks for a running job
	// whose spec changed to be deleted and recreated.
	AnnotationRecreate = "flotilla.dev/recreate"
	// AnnotationPreflight is the gang preflight's verdict at submission.
	AnnotationPreflight = "flotilla.dev/preflight"
)

// GPUResource is the GPU resource name the capacity snapshot always
// reports.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// Unit condition reasons of job units, beside pkg/status's.
const (
	ReasonNotInstalled   = "VolcanoNotInstalled"
	ReasonUnschedulable  = "Unschedulable"
	ReasonSpecChanged    = "JobSpecChanged"
	ReasonJobTerminating = "JobTerminating"
	ReasonNotOwned       = "JobNotOwned"
)

// PhaseNotSubmitted is the status phase of a job the preflight kept back.
const PhaseNotSubmitted = "NotSubmitted"

// MessageSpecChanged reports a running job whose spec changed in Git.
const MessageSpecChanged = "spec changed; running job left as is"

// DefaultCompletedRetention is how long a finished job whose unit left the
// slice is kept.
const DefaultCompletedRetention = time.Hour
