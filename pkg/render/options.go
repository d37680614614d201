package render

import "time"

// Defaults for Limits fields left zero.
const (
	DefaultMaxFileSize   int64 = 4 << 20
	DefaultMaxTotalSize  int64 = 64 << 20
	DefaultMaxObjects          = 10000
	DefaultTimeout             = 30 * time.Second
	DefaultMaxHelmMemory int64 = 1 << 30
)

// Options tune one render. The zero value is valid.
type Options struct {
	Capabilities Capabilities
	Limits       Limits
	// HelmInProcess runs Helm templating in a goroutine of this process even
	// when a worker is available. A template that never ends then keeps
	// burning a CPU (and its memory) after Unit has returned ErrTimeout; use
	// it only for trusted charts, tests and benchmarks.
	HelmInProcess bool
	// Decryptor decrypts SOPS-encrypted files (manifests, and secretGenerator
	// inputs such as .env files) as they are read. Only the agent sets it;
	// without one (the hub), each SOPS document renders redacted: same
	// keys, every encrypted value replaced by a sopsdecrypt.RedactedPrefix
	// marker of its ciphertext, the sops metadata removed.
	Decryptor Decryptor
}

// Capabilities are what Helm templates see as .Capabilities. Empty fields
// take Helm's defaults (the Kubernetes version Helm was built against and
// its built-in API versions).
type Capabilities struct {
	// KubeVersion like "v1.31.2".
	KubeVersion string
	// APIVersions are added to Helm's defaults; entries are "group/version"
	// or "group/version/Kind", as .Capabilities.APIVersions.Has checks them.
	APIVersions []string
}

// Limits bound one render. Zero means the default.
type Limits struct {
	// MaxFileSize bounds every file read (kustomization, manifest, chart
	// file, values).
	MaxFileSize int64
	// MaxTotalSize bounds the rendered bytes of a unit: the Helm output and
	// the JSON size of the final objects, and the sum of a chart's files.
	MaxTotalSize int64
	// MaxObjects bounds the number of objects of a unit.
	MaxObjects int
	// Timeout bounds the whole render; the caller's ctx deadline also applies.
	Timeout time.Duration
	// MaxHelmMemory bounds the resident memory of the Helm worker process
	// while it templates (checked every few milliseconds; the address space
	// is also capped, as a backstop, by an rlimit).
	MaxHelmMemory int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxFileSize <= 0 {
		l.MaxFileSize = DefaultMaxFileSize
	}
	if l.MaxTotalSize <= 0 {
		l.MaxTotalSize = DefaultMaxTotalSize
	}
	if l.MaxObjects <= 0 {
		l.MaxObjects = DefaultMaxObjects
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxHelmMemory <= 0 {
		l.MaxHelmMemory = DefaultMaxHelmMemory
	}
	return l
}
