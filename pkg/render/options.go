package render

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Defaults for Limits fields left zero.
const (
	DefaultMaxFileSize   int64 = 4 << 20
	DefaultMaxTotalSize  int64 = 64 << 20
	DefaultMaxObjects          = 10000
	DefaultTimeout             = 30 * time.Second
	DefaultMaxHelmMemory int64 = 1 << 30
)

// DefaultKubeVersion is the Kubernetes version charts see
// (.Capabilities.KubeVersion, and Chart.yaml's kubeVersion check) when the
// cluster's is not known: no status from its agent yet and no
// spec.kubernetesVersion in clusters/<name>.yaml. It follows the rule Helm's
// own release builds use, the minor version of the client-go they link
// (TestDefaultKubeVersionFollowsClientGo keeps it so), where Helm's library
// alone would say v1.20.0.
const DefaultKubeVersion = "v1.37.0"

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

// Capabilities are what Helm templates see as .Capabilities, and what the
// cluster says of its kinds' scopes. Empty fields take the defaults:
// DefaultKubeVersion, and Helm's built-in API versions.
type Capabilities struct {
	// KubeVersion like "v1.31.2"; DefaultKubeVersion when empty.
	KubeVersion string
	// APIVersions are added to Helm's defaults; entries are "group/version"
	// or "group/version/Kind", as .Capabilities.APIVersions.Has checks them.
	APIVersions []string
	// Namespaced is the scope of the kinds the cluster serves (true:
	// namespaced), from discovery. Kinds it lacks take their scope from
	// the unit's own CustomResourceDefinitions, then from the kinds built
	// into Kubernetes; see Result.UnknownScope.
	Namespaced map[schema.GroupKind]bool
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
