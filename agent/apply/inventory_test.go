package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/object"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func entry(group, version, kind, ns, name string, state EntryState, content, fp string) Entry {
	return Entry{
		ID:      object.ObjMetadata{Namespace: ns, Name: name, GroupKind: schema.GroupKind{Group: group, Kind: kind}},
		Version: version, State: state, ContentHash: content, Fingerprint: fp,
	}
}

func TestInventoryRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		entries []Entry
		hooks   HookRun
	}{
		{"empty", nil, HookRun{}},
		{"hooks", nil, HookRun{Hash: "sha256:x", Install: true, State: hookFailedPre, Message: "pre-install hook Job/apps/migrate failed: BackoffLimitExceeded: Job has reached the specified backoff limit"}},
		{"hooks done", nil, HookRun{Hash: "sha256:y", State: hookDone}},
		{"mixed", []Entry{
			entry("", "v1", "Namespace", "", "apps", Applied, "0123456789abcdef", "fedcba9876543210"),
			entry("", "v1", "Secret", "apps", "creds", Applied, "", "aaaaaaaaaaaaaaaa"),
			entry("", "v1", "Service", "apps", "web", Pending, "", ""),
			entry("", "v1", "Service", "other", "web", Stale, "", "bbbbbbbbbbbbbbbb"),
			entry("apps", "v1", "Deployment", "apps", "web", Applied, "1111111111111111", "2222222222222222"),
			entry("rbac.authorization.k8s.io", "v1", "ClusterRole", "", "system:odd name", Applied, "3333333333333333", "4444444444444444"),
		}, HookRun{}},
		{"awkward names", []Entry{
			entry("", "v1", "ConfigMap", "ns", `"quoted"`, Applied, "1111111111111111", "-x"),
			entry("rbac.authorization.k8s.io", "v1", "ClusterRole", "", "line\nbreak", Applied, "1111111111111111", "2222222222222222"),
			entry("rbac.authorization.k8s.io", "v1", "ClusterRole", "", " leading space", Applied, "1111111111111111", "2222222222222222"),
		}, HookRun{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &Inventory{Unit: "web", Cluster: "c1", Revision: "main@sha1:abc", Hash: "sha256:x", Prune: true, Entries: append([]Entry(nil), tt.entries...), Hooks: tt.hooks}
			sortEntries(in.Entries)
			cm, err := in.toConfigMap("flotilla-system")
			if err != nil {
				t.Fatal(err)
			}
			if cm.Name != "flotilla-inventory-web" || cm.Labels[inventoryUnitLabel] != "web" || cm.Labels[LabelManagedBy] != ManagedByValue {
				t.Fatalf("unexpected metadata %s %v", cm.Name, cm.Labels)
			}
			out, err := inventoryFromConfigMap(cm)
			if err != nil {
				t.Fatal(err)
			}
			if out.Unit != in.Unit || out.Cluster != in.Cluster || out.Revision != in.Revision || out.Hash != in.Hash || out.Prune != in.Prune || out.Hooks != in.Hooks {
				t.Fatalf("header mismatch: %+v", out)
			}
			if !reflect.DeepEqual(out.Entries, in.Entries) && !(len(out.Entries) == 0 && len(in.Entries) == 0) {
				t.Fatalf("entries differ:\n got %+v\nwant %+v", out.Entries, in.Entries)
			}
		})
	}
}

// TestInventoryLarge checks the 1 MiB ConfigMap limit with far more objects
// than a unit normally has, and that the text form is used when small.
func TestInventoryLarge(t *testing.T) {
	for _, n := range []int{10, 1000, 5000, 20000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			in := &Inventory{Unit: "big", Hash: "sha256:x"}
			for i := range n {
				ns := fmt.Sprintf("tenant-%03d", i%100)
				in.Entries = append(in.Entries,
					entry("apps", "v1", "Deployment", ns, fmt.Sprintf("podinfo-%06d", i), Applied, randomHex(i, "c"), randomHex(i, "f")))
			}
			sortEntries(in.Entries)
			cm, err := in.toConfigMap("ns")
			if err != nil {
				t.Fatal(err)
			}
			size := len(cm.Data[keyObjects]) + len(cm.BinaryData[keyObjectsGz])
			if size > maxInventoryBytes {
				t.Fatalf("%d objects take %d bytes", n, size)
			}
			if n <= 1000 && cm.Data[keyObjects] == "" {
				t.Fatalf("%d objects should stay uncompressed", n)
			}
			t.Logf("%d objects: %d bytes (compressed=%v)", n, size, cm.BinaryData != nil)
			out, err := inventoryFromConfigMap(cm)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(out.Entries, in.Entries) {
				t.Fatal("entries differ after round trip")
			}
		})
	}
}

// randomHex is a 16-hex-digit hash like the real ones (incompressible).
func randomHex(i int, salt string) string {
	sum := sha256.Sum256([]byte(fmt.Sprint(salt, i)))
	return hex.EncodeToString(sum[:8])
}

func TestInventoryDecodeErrors(t *testing.T) {
	for _, bad := range []string{
		"0000 1111 name\n",                 // no headers
		"@apps/v1/Deployment\nabc def x\n", // no namespace header
		"@apps\n#ns\n",                     // bad kind header
		"@/v1/Service\n#ns\nonlyone\n",     // too few fields
		"@/v1/Service\n#ns\na b \"unterminated\n",
		"@/v1/Service\n#ns\r\r\na b x\n", // a CR beyond the one before a newline
	} {
		if _, err := decodeEntries([]byte(bad)); err == nil {
			t.Errorf("decode %q: want error", bad)
		}
	}
	// Line ends of CR LF are still read as line ends.
	if got, err := decodeEntries([]byte("@/v1/Service\r\n#ns\r\na b x\r\n")); err != nil || len(got) != 1 || got[0].ID.Namespace != "ns" || got[0].ID.Name != "x" {
		t.Errorf("CR LF: got %+v, %v; want one object ns/x", got, err)
	}
	cm := &corev1.ConfigMap{Data: map[string]string{keyFormat: "v9"}}
	if _, err := inventoryFromConfigMap(cm); !errors.Is(err, ErrInventory) {
		t.Errorf("unknown format: got %v, want ErrInventory", err)
	}
	cm = &corev1.ConfigMap{Data: map[string]string{keyFormat: inventoryFormat}, BinaryData: map[string][]byte{keyObjectsGz: []byte("not gzip")}}
	if _, err := inventoryFromConfigMap(cm); !errors.Is(err, ErrInventory) {
		t.Errorf("bad gzip: got %v, want ErrInventory", err)
	}
}

func FuzzDecodeEntries(f *testing.F) {
	f.Add([]byte("@apps/v1/Deployment\n#ns\n0123 4567 web\n~ - old\n- - new\n"))
	f.Add([]byte("@/v1/Namespace\n#\n* - \"a\\nb\"\n"))
	f.Add([]byte("@apps/v1/Deployment\r\n#\r\r\n0123 - web\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := decodeEntries(data)
		if err != nil {
			return
		}
		// Whatever decodes must survive a round trip.
		sortEntries(entries)
		again, err := decodeEntries(encodeEntries(entries))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		sortEntries(again)
		if len(again) != len(entries) {
			t.Fatalf("round trip changed length %d -> %d", len(entries), len(again))
		}
		for i := range entries {
			a, b := entries[i], again[i]
			if a.ID != b.ID || a.State != b.State || a.Version != b.Version || (a.State == Applied && a.ContentHash != b.ContentHash) || a.Fingerprint != b.Fingerprint {
				t.Fatalf("round trip changed %+v -> %+v", a, b)
			}
		}
	})
}
