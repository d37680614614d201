package apply

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// EntryState says where an inventory entry stands.
type EntryState int

const (
	// Applied: the object was applied; ContentHash and Fingerprint describe
	// that apply.
	Applied EntryState = iota
	// Pending: recorded before its first apply, so an interrupted apply
	// cannot orphan it.
	Pending
	// Stale: no longer rendered, but its delete failed; retried next time.
	Stale
)

func (s EntryState) String() string {
	switch s {
	case Applied:
		return "applied"
	case Pending:
		return "pending"
	case Stale:
		return "stale"
	}
	return "unknown"
}

// Entry is one object of a unit's inventory.
type Entry struct {
	ID      object.ObjMetadata
	Version string
	State   EntryState
	// ContentHash identifies the applied content (empty for Secrets, which
	// are never hashed, and for non-Applied entries).
	ContentHash string
	// Fingerprint identifies the live object's "flotilla" managed-fields
	// entry right after the apply; a different one means drift.
	Fingerprint string
}

// GroupVersionKind returns the entry's kind with the version it was
// applied with.
func (e Entry) GroupVersionKind() schema.GroupVersionKind {
	return e.ID.GroupKind.WithVersion(e.Version)
}

// Subject formats the entry as Kind/namespace/name.
func (e Entry) Subject() string { return subject(e.ID.GroupKind.Kind, e.ID.Namespace, e.ID.Name) }

// Inventory is what a unit last applied to the cluster.
type Inventory struct {
	Unit    string
	Cluster string
	// Revision is the revision that last changed the inventory.
	Revision string
	// Hash is the unit hash of the last apply.
	Hash string
	// Prune is the unit's prune flag at the last apply; Delete honours it.
	Prune bool
	// Entries are sorted by group, kind, version, namespace and name.
	Entries []Entry
	// Hooks records the unit's last Helm hook run (hooks.go).
	Hooks HookRun

	resourceVersion string // of the ConfigMap; "" when not stored yet
	writeSeq        uint64 // Applier write sequence of the last store
}

// appliedAt reports whether the inventory records an apply of content hash
// with this prune flag: the one test of "unchanged" that Check's UpToDate
// and Apply's skip share, each adding what it observed (entries, drift and
// hooks; objects to write).
func (inv *Inventory) appliedAt(hash string, prune bool) bool {
	return inv != nil && inv.resourceVersion != "" && hash != "" && inv.Hash == hash && inv.Prune == prune
}

// IDs returns the ids of the entries in the given states (all when none).
func (inv *Inventory) IDs(states ...EntryState) object.ObjMetadataSet {
	var ids object.ObjMetadataSet
	for _, e := range inv.Entries {
		if len(states) == 0 || slices.Contains(states, e.State) {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

func (inv *Inventory) entryMap() map[object.ObjMetadata]Entry {
	m := make(map[object.ObjMetadata]Entry, len(inv.Entries))
	for _, e := range inv.Entries {
		m[e.ID] = e
	}
	return m
}

func (inv *Inventory) clone() *Inventory {
	c := *inv
	c.Entries = slices.Clone(inv.Entries)
	return &c
}

func sortEntries(entries []Entry) {
	slices.SortFunc(entries, func(a, b Entry) int {
		return cmpStrings(
			[]string{a.ID.GroupKind.Group, a.ID.GroupKind.Kind, a.Version, a.ID.Namespace, a.ID.Name},
			[]string{b.ID.GroupKind.Group, b.ID.GroupKind.Kind, b.Version, b.ID.Namespace, b.ID.Name})
	})
}

func cmpStrings(a, b []string) int {
	for i := range a {
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// ConfigMap layout.
const (
	inventoryPrefix    = "flotilla-inventory-"
	inventoryUnitLabel = "flotilla.dev/inventory-unit"
	inventoryFormat    = "v1"

	keyFormat    = "format"
	keyUnit      = "unit"
	keyCluster   = "cluster"
	keyRevision  = "revision"
	keyHash      = "hash"
	keyPrune     = "prune"
	keyCount     = "count"
	keyObjects   = "objects"
	keyObjectsGz = "objects.gz"

	// compressAbove: object lists larger than this are gzipped; below it
	// they stay readable with kubectl.
	compressAbove = 128 << 10
	// maxInventoryBytes keeps the ConfigMap under the API server's 1 MiB
	// limit with room for the other keys and metadata.
	maxInventoryBytes = 1000 << 10
)

// InventoryName is the name of a unit's inventory ConfigMap.
func InventoryName(unit string) string { return inventoryPrefix + unit }

// Markers in the first column of an object line.
const (
	markPending  = "-"
	markStale    = "~"
	markUnhashed = "*"
	markNone     = "-"
)

// encodeEntries writes entries (sorted) as lines:
//
//	@<group>/<version>/<kind>       a kind header
//	#<namespace>                    a namespace header ("#" alone: cluster-scoped)
//	<content> <fingerprint> <name>  an object of the current kind and namespace
//
// content is a hash, "*" (applied, not hashed), "-" (pending) or "~"
// (stale); fingerprint is a hash or "-". Names containing line breaks, or
// starting with a quote, are Go-quoted.
func encodeEntries(entries []Entry) []byte {
	var b bytes.Buffer
	var gvk, ns string
	first := true
	for _, e := range entries {
		h := e.ID.GroupKind.Group + "/" + e.Version + "/" + e.ID.GroupKind.Kind
		if first || h != gvk {
			b.WriteString("@" + h + "\n")
			gvk = h
			b.WriteString("#" + e.ID.Namespace + "\n")
			ns = e.ID.Namespace
		} else if e.ID.Namespace != ns {
			b.WriteString("#" + e.ID.Namespace + "\n")
			ns = e.ID.Namespace
		}
		first = false
		content := e.ContentHash
		switch {
		case e.State == Pending:
			content = markPending
		case e.State == Stale:
			content = markStale
		case content == "":
			content = markUnhashed
		}
		fp := e.Fingerprint
		if fp == "" {
			fp = markNone
		}
		name := e.ID.Name
		if strings.ContainsAny(name, "\n\r") || strings.HasPrefix(name, `"`) {
			name = strconv.Quote(name)
		}
		b.WriteString(content + " " + fp + " " + name + "\n")
	}
	return b.Bytes()
}

func decodeEntries(data []byte) ([]Entry, error) {
	var (
		entries []Entry
		gvk     *schema.GroupVersionKind
		ns      *string
		lineNo  int
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if line == "" {
			continue
		}
		// The scanner drops one CR before each newline; one more is not
		// something the encoder writes, and it would not survive a round trip.
		if strings.ContainsRune(line, '\r') {
			return nil, fmt.Errorf("line %d: carriage return", lineNo)
		}
		switch line[0] {
		case '@':
			parts := strings.SplitN(line[1:], "/", 3)
			if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
				return nil, fmt.Errorf("line %d: bad kind header", lineNo)
			}
			gvk = &schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}
			ns = nil
		case '#':
			n := line[1:]
			ns = &n
		default:
			if gvk == nil || ns == nil {
				return nil, fmt.Errorf("line %d: object before kind and namespace headers", lineNo)
			}
			fields := strings.SplitN(line, " ", 3)
			if len(fields) != 3 || fields[2] == "" {
				return nil, fmt.Errorf("line %d: want <content> <fingerprint> <name>", lineNo)
			}
			name := fields[2]
			if strings.HasPrefix(name, `"`) {
				unq, err := strconv.Unquote(name)
				if err != nil || unq == "" {
					return nil, fmt.Errorf("line %d: bad quoted name", lineNo)
				}
				name = unq
			}
			e := Entry{
				ID:      object.ObjMetadata{Namespace: *ns, Name: name, GroupKind: gvk.GroupKind()},
				Version: gvk.Version,
			}
			switch fields[0] {
			case markPending:
				e.State = Pending
			case markStale:
				e.State = Stale
			case markUnhashed:
				e.State = Applied
			default:
				e.State, e.ContentHash = Applied, fields[0]
			}
			if fields[1] != markNone {
				e.Fingerprint = fields[1]
			}
			entries = append(entries, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return entries, nil
}

// toConfigMap renders inv as its ConfigMap in namespace.
func (inv *Inventory) toConfigMap(namespace string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            InventoryName(inv.Unit),
			Namespace:       namespace,
			ResourceVersion: inv.resourceVersion,
			Labels: map[string]string{
				LabelManagedBy:     ManagedByValue,
				inventoryUnitLabel: inv.Unit,
			},
		},
		Data: map[string]string{
			keyFormat:   inventoryFormat,
			keyUnit:     inv.Unit,
			keyCluster:  inv.Cluster,
			keyRevision: inv.Revision,
			keyHash:     inv.Hash,
			keyPrune:    strconv.FormatBool(inv.Prune),
			keyCount:    strconv.Itoa(len(inv.Entries)),
		},
	}
	if h := inv.Hooks; h.Hash != "" {
		kind := "upgrade"
		if h.Install {
			kind = "install"
		}
		cm.Data[keyHooks] = h.Hash + " " + kind + " " + h.State
		if h.Message != "" {
			cm.Data[keyHooksMessage] = h.Message
		}
	}
	objs := encodeEntries(inv.Entries)
	if len(objs) <= compressAbove {
		cm.Data[keyObjects] = string(objs)
		return cm, nil
	}
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = w.Write(objs)
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("%w: compress: %w", ErrInventory, err)
	}
	if gz.Len() > maxInventoryBytes {
		return nil, fmt.Errorf("%w: %d objects do not fit a ConfigMap (%d bytes compressed)", ErrInventory, len(inv.Entries), gz.Len())
	}
	cm.BinaryData = map[string][]byte{keyObjectsGz: gz.Bytes()}
	return cm, nil
}

// inventoryFromConfigMap parses a stored inventory.
func inventoryFromConfigMap(cm *corev1.ConfigMap) (*Inventory, error) {
	if f := cm.Data[keyFormat]; f != inventoryFormat {
		return nil, fmt.Errorf("%w: %s/%s: unknown format %q", ErrInventory, cm.Namespace, cm.Name, f)
	}
	inv := &Inventory{
		Unit:            cm.Data[keyUnit],
		Cluster:         cm.Data[keyCluster],
		Revision:        cm.Data[keyRevision],
		Hash:            cm.Data[keyHash],
		Prune:           cm.Data[keyPrune] == "true",
		resourceVersion: cm.ResourceVersion,
	}
	if h := strings.Fields(cm.Data[keyHooks]); len(h) == 3 {
		inv.Hooks = HookRun{Hash: h[0], Install: h[1] == "install", State: h[2], Message: cm.Data[keyHooksMessage]}
	}
	objs := []byte(cm.Data[keyObjects])
	if gz, ok := cm.BinaryData[keyObjectsGz]; ok {
		r, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			return nil, fmt.Errorf("%w: %s/%s: %w", ErrInventory, cm.Namespace, cm.Name, err)
		}
		// Bounded: a ConfigMap is at most 1 MiB, and the text compresses
		// well under 1:64.
		objs, err = io.ReadAll(io.LimitReader(r, 64<<20))
		if err != nil {
			return nil, fmt.Errorf("%w: %s/%s: %w", ErrInventory, cm.Namespace, cm.Name, err)
		}
	}
	entries, err := decodeEntries(objs)
	if err != nil {
		return nil, fmt.Errorf("%w: %s/%s: %w", ErrInventory, cm.Namespace, cm.Name, err)
	}
	sortEntries(entries)
	inv.Entries = entries
	return inv, nil
}
