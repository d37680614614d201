package testenv

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestGeneratePKIServingCertVerifiesForLoopbackNames(t *testing.T) {
	p, err := generatePKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.caPEM) {
		t.Fatal("CA PEM not parseable")
	}
	cert := readCert(t, p.servingCert)
	for _, name := range []string{"127.0.0.1", "localhost", serviceIP, "kubernetes.default.svc"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
			t.Errorf("serving cert does not verify for %s: %v", name, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: pool}); err == nil {
		t.Error("serving cert verifies for example.com; SANs too broad")
	}
	for _, f := range []string{p.caKey, p.servingK, p.saKey} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, st.Mode().Perm())
		}
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestNodeObject(t *testing.T) {
	taint := corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name    string
		spec    NodeSpec
		wantCPU string
		wantMem string
		wantGPU int64 // -1: resource absent
		wantErr bool
	}{
		{name: "defaults", spec: NodeSpec{Name: "n"}, wantCPU: "32", wantMem: "256Gi", wantGPU: -1},
		{name: "gpu", spec: NodeSpec{Name: "g", CPU: "4", Memory: "8Gi", GPUs: 2, Taints: []corev1.Taint{taint}}, wantCPU: "4", wantMem: "8Gi", wantGPU: 2},
		{name: "bad cpu", spec: NodeSpec{Name: "b", CPU: "lots"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, err := tt.spec.nodeObject()
			if tt.wantErr {
				if err == nil {
					t.Fatal("want error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := node.Annotations[kwokNodeAnnotation]; got != kwokNodeValue {
				t.Errorf("kwok annotation = %q", got)
			}
			if node.Labels["type"] != "kwok" || node.Labels["kubernetes.io/hostname"] != tt.spec.Name {
				t.Errorf("labels = %v", node.Labels)
			}
			if _, ok := node.Labels["node.kubernetes.io/exclude-from-external-load-balancers"]; !ok {
				t.Error("missing exclude-from-external-load-balancers label")
			}
			alloc := node.Status.Allocatable
			if q := alloc[corev1.ResourceCPU]; q.Cmp(resource.MustParse(tt.wantCPU)) != 0 {
				t.Errorf("cpu = %s, want %s", q.String(), tt.wantCPU)
			}
			if q := alloc[corev1.ResourceMemory]; q.Cmp(resource.MustParse(tt.wantMem)) != 0 {
				t.Errorf("memory = %s, want %s", q.String(), tt.wantMem)
			}
			gpu, ok := alloc[GPUResource]
			switch {
			case tt.wantGPU < 0 && ok:
				t.Errorf("unexpected GPU resource %s", gpu.String())
			case tt.wantGPU >= 0 && gpu.Value() != tt.wantGPU:
				t.Errorf("gpu = %s, want %d", gpu.String(), tt.wantGPU)
			}
			if len(node.Spec.Taints) != len(tt.spec.Taints) {
				t.Errorf("taints = %v, want %v", node.Spec.Taints, tt.spec.Taints)
			}
		})
	}
}

func TestNodesHelpersCopyTemplate(t *testing.T) {
	nodes := GPUNodes("gpu", 3, 4)
	if len(nodes) != 3 {
		t.Fatalf("got %d nodes", len(nodes))
	}
	for i, n := range nodes {
		if n.Name != "gpu-"+strconv.Itoa(i) || n.GPUs != 4 {
			t.Errorf("node %d = %+v", i, n)
		}
	}
	nodes[0].Labels["x"] = "y"
	if _, leaked := nodes[1].Labels["x"]; leaked {
		t.Error("nodes share one label map")
	}
}

func TestBinDir(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+modulePath+"\n\ngo 1.26\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nested := filepath.Join(root, "test", "deep")
	if err := os.MkdirAll(nested, 0o700); err != nil {
		t.Fatal(err)
	}
	// A foreign module in between must not stop the walk.
	if err := os.WriteFile(filepath.Join(root, "test", "go.mod"), []byte("module example.com/other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(nested)

	t.Run("walks up to the flotilla go.mod", func(t *testing.T) {
		t.Setenv(BinDirEnv, "")
		got, err := BinDir()
		if err != nil {
			t.Fatal(err)
		}
		gotRoot, _ := filepath.EvalSymlinks(filepath.Dir(got))
		wantRoot, _ := filepath.EvalSymlinks(root)
		if filepath.Base(got) != "bin" || gotRoot != wantRoot {
			t.Errorf("BinDir = %s, want %s", got, filepath.Join(root, "bin"))
		}
	})
	t.Run("env overrides", func(t *testing.T) {
		t.Setenv(BinDirEnv, "/opt/flotilla-bin")
		got, err := BinDir()
		if err != nil || got != "/opt/flotilla-bin" {
			t.Errorf("BinDir = %q, %v", got, err)
		}
	})
	t.Run("missing binary says make tools", func(t *testing.T) {
		t.Setenv(BinDirEnv, t.TempDir())
		_, err := New(t.Context(), "x", "", ClusterOptions{})
		if !errors.Is(err, ErrToolMissing) {
			t.Fatalf("err = %v, want ErrToolMissing", err)
		}
		if !strings.Contains(err.Error(), "make tools") {
			t.Errorf("error %q does not tell to run make tools", err)
		}
	})
}

func TestTailFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 100 {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	got := tailFile(path, 3)
	if got != "line 97\nline 98\nline 99" {
		t.Errorf("tail = %q", got)
	}
}

func TestFreePortsDistinct(t *testing.T) {
	seen := map[int]bool{}
	for range 5 {
		ports, err := freePorts(8)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
		}
	}
}

func TestPatchPodCompleteStage(t *testing.T) {
	dir := t.TempDir()
	complete := filepath.Join(dir, "pod-complete.yaml")
	other := filepath.Join(dir, "pod-ready.yaml")
	write := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(complete, `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
  next:
    statusTemplate: "phase: Succeeded"
`)
	write(other, "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: pod-ready\nspec: {}\n")

	got, changed, err := patchPodCompleteStage(complete)
	if err != nil || !changed {
		t.Fatalf("patch pod-complete: changed=%v err=%v", changed, err)
	}
	for _, want := range []string{
		`key: .metadata.annotations["` + KeepRunningAnnotation + `"]`,
		"operator: DoesNotExist",
		"key: .status.phase", // the original expression survives
		"statusTemplate: 'phase: Succeeded'",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("patched stage lacks %q:\n%s", want, got)
		}
	}
	if _, changed, err := patchPodCompleteStage(other); err != nil || changed {
		t.Errorf("pod-ready stage: changed=%v err=%v, want untouched", changed, err)
	}
}
