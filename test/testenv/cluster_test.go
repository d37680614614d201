package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestMinimalClusters starts two minimal clusters at once and checks that
// each is a real, secured apiserver (version, RBAC, ServiceAccount tokens),
// that they share neither data nor credentials, and that Stop leaves no
// process and no etcd data behind.
func TestMinimalClusters(t *testing.T) {
	t.Parallel()
	cs := StartClusters(t, 2, ClusterOptions{Mode: Minimal, Users: []User{{Name: "ci-bot", Groups: []string{"flotilla:ci"}}}})
	t.Logf("two minimal clusters started in parallel: %s, %s", cs[0].StartDuration(), cs[1].StartDuration())
	t.Run("secured apiserver", func(t *testing.T) { checkSecuredAPIServer(t, cs[0]) })
	t.Run("independent and stoppable", func(t *testing.T) { checkIndependentAndStop(t, cs[1], cs[0]) })
}

func checkSecuredAPIServer(t *testing.T, c *Cluster) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	cs := kubernetes.NewForConfigOrDie(c.RESTConfig())
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.GitVersion, "v1.36.") {
		t.Errorf("apiserver version %s, want v1.36.x", v.GitVersion)
	}

	const ns = "rbac-check"
	if err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if err := c.Client().Create(ctx, cm); err != nil {
		t.Fatal(err)
	}

	// The restricted identity, through its kubeconfig file, is authenticated
	// but authorized for nothing until a test grants it RBAC.
	restrictedCfg, err := clientcmd.BuildConfigFromFlags("", c.RestrictedKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if who, _ := selfSubject(ctx, t, restrictedCfg); who != RestrictedUser {
		t.Errorf("restricted kubeconfig authenticates as %q", who)
	}
	// An extra identity from ClusterOptions.Users, with its groups.
	botToken, ok := c.Token("ci-bot")
	if !ok {
		t.Fatal("no token for ci-bot")
	}
	if who, groups := selfSubject(ctx, t, c.RESTConfigFor("ci-bot", botToken)); who != "ci-bot" || !slices.Contains(groups, "flotilla:ci") {
		t.Errorf("ci-bot authenticates as %q in %v", who, groups)
	}
	restricted, err := client.New(restrictedCfg, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var cms corev1.ConfigMapList
	if err := restricted.List(ctx, &cms, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Fatalf("restricted list before grant: err = %v, want Forbidden", err)
	}

	grantConfigMapReader(ctx, t, c.Client(), ns, RestrictedUser)
	err = poll(ctx, "RBAC grant effective", func(ctx context.Context) (bool, error) {
		return restricted.List(ctx, &cms, client.InNamespace(ns)) == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) == 0 || !containsConfigMap(cms.Items, "probe") {
		t.Errorf("restricted user lists %d configmaps, want to see probe", len(cms.Items))
	}
	var secrets corev1.SecretList
	if err := restricted.List(ctx, &secrets, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Errorf("restricted list secrets: err = %v, want Forbidden (grant is configmaps only)", err)
	}
	if err := restricted.List(ctx, &cms, client.InNamespace(metav1.NamespaceDefault)); !apierrors.IsForbidden(err) {
		t.Errorf("restricted list in default: err = %v, want Forbidden (grant is namespaced)", err)
	}

	// A ServiceAccount token from the TokenRequest API works through
	// KubeconfigFor, proving the signing key and issuer flags fit together.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns}}
	if err := c.Client().Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "agent", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path, err := c.KubeconfigFor("agent", tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	saCfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if who, _ := selfSubject(ctx, t, saCfg); who != "system:serviceaccount:"+ns+":agent" {
		t.Errorf("service account kubeconfig authenticates as %q", who)
	}
}

func checkIndependentAndStop(t *testing.T, a, b *Cluster) {
	if a.Host() == b.Host() {
		t.Fatalf("both clusters at %s", a.Host())
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-in-a", Namespace: metav1.NamespaceDefault}}
	if err := a.Client().Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := b.Client().Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("cluster b sees cluster a's configmap: err = %v", err)
	}
	// a's admin token means nothing to b.
	crossCfg := b.RESTConfigFor("intruder", a.tokens[AdminUser])
	cross := kubernetes.NewForConfigOrDie(crossCfg)
	if _, err := cross.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("a's admin token against b: err = %v, want Unauthorized", err)
	}

	pids := a.pids()
	if len(pids) != 2 {
		t.Fatalf("minimal cluster runs %d processes, want 2 (etcd, apiserver)", len(pids))
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d still alive after Stop", pid)
		}
	}
	if _, err := os.Stat(a.etcdDataDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("etcd data dir still there after Stop: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", strings.TrimPrefix(a.Host(), "https://"), time.Second); err == nil {
		_ = conn.Close()
		t.Errorf("apiserver port still open after Stop")
	}
	if err := a.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	// b is unaffected by a's shutdown.
	if err := b.Client().List(ctx, &corev1.NamespaceList{}); err != nil {
		t.Errorf("cluster b after a stopped: %v", err)
	}
}

func selfSubject(ctx context.Context, t *testing.T, cfg *rest.Config) (string, []string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.UserInfo.Username, r.Status.UserInfo.Groups
}

func grantConfigMapReader(ctx context.Context, t *testing.T, cl client.Client, ns, user string) {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-reader", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-reader", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

func containsConfigMap(items []corev1.ConfigMap, name string) bool {
	for _, cm := range items {
		if cm.Name == name {
			return true
		}
	}
	return false
}

func (c *Cluster) pids() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, p := range c.procs {
		out = append(out, p.cmd.Process.Pid)
	}
	return out
}

// alive reports whether pid exists and is not a zombie (a zombie has exited;
// it only waits for its new parent, init, to reap it).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// Format: pid (comm) state ...; comm may contain spaces.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

const helperEnv = "FLOTILLA_TESTENV_HELPER"

// TestHelperProcess is not a test: TestNoComponentOutlivesTheTestBinary runs
// the test binary with helperEnv set, and this starts components in it:
// helperEnv=cluster starts a minimal cluster through New; helperEnv=etcd
// starts two bare etcd processes, which is all a Pdeathsig check needs.
func TestHelperProcess(t *testing.T) {
	var pids []int
	switch os.Getenv(helperEnv) {
	case "cluster":
		c, err := New(context.Background(), "helper", "", ClusterOptions{Mode: Minimal})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Println("DIR", c.Dir)
		pids = c.pids()
	case "etcd":
		bins, err := toolPaths(Etcd)
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		dir, err := os.MkdirTemp("", "flotilla-testenv-helper-")
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Println("DIR", dir)
		for i := range 2 {
			ports, err := freePorts(2)
			if err != nil {
				fmt.Println("ERROR", err)
				os.Exit(1)
			}
			name := "etcd" + strconv.Itoa(i)
			p, err := startProcess(name, filepath.Join(dir, name+".log"), bins[Etcd], nil,
				"--data-dir="+filepath.Join(dir, name),
				"--listen-client-urls=http://"+loopback(ports[0]), "--advertise-client-urls=http://"+loopback(ports[0]),
				"--listen-peer-urls=http://"+loopback(ports[1]), "--initial-advertise-peer-urls=http://"+loopback(ports[1]),
				"--initial-cluster=default=http://"+loopback(ports[1]))
			if err != nil {
				fmt.Println("ERROR", err)
				os.Exit(1)
			}
			pids = append(pids, p.cmd.Process.Pid)
		}
	default:
		t.Skip("helper process for TestNoComponentOutlivesTheTestBinary")
	}
	fmt.Println("PIDS", strings.Trim(fmt.Sprint(pids), "[]"))
	time.Sleep(10 * time.Minute)
	os.Exit(3)
}

// TestNoComponentOutlivesTheTestBinary kills a test binary that runs a
// cluster, by interrupt (the registry's signal handler) and by SIGKILL
// (Pdeathsig), and checks that every component died with it.
func TestNoComponentOutlivesTheTestBinary(t *testing.T) {
	NeedsCluster(t)
	t.Parallel()
	for _, tc := range []struct {
		sig    syscall.Signal
		helper string
	}{
		// An interrupt reaches the registry's handler, which kills a whole cluster.
		{syscall.SIGINT, "cluster"},
		// SIGKILL leaves no handler to run: only Pdeathsig stops the children.
		{syscall.SIGKILL, "etcd"},
	} {
		sig := tc.sig
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
			cmd.Env = append(os.Environ(), helperEnv+"="+tc.helper)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pids []int
			var dir string
			sc := bufio.NewScanner(out)
			for pids == nil && sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "ERROR"):
					t.Fatal(line)
				case strings.HasPrefix(line, "DIR "):
					dir = strings.TrimPrefix(line, "DIR ")
				case strings.HasPrefix(line, "PIDS "):
					for _, f := range strings.Fields(strings.TrimPrefix(line, "PIDS ")) {
						pid, err := strconv.Atoi(f)
						if err != nil {
							t.Fatal(err)
						}
						pids = append(pids, pid)
					}
				}
			}
			if len(pids) != 2 {
				t.Fatalf("helper reported pids %v", pids)
			}
			for _, pid := range pids {
				if !alive(pid) {
					t.Fatalf("component %d not running before the kill", pid)
				}
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			err = poll(ctx, "components gone", func(context.Context) (bool, error) {
				for _, pid := range pids {
					if alive(pid) {
						return false, nil
					}
				}
				return true, nil
			})
			if err != nil {
				t.Fatalf("components %v outlived the test binary killed by %s: %v", pids, sig, err)
			}
			// A killed binary cannot delete its temporary directory.
			if dir != "" {
				_ = os.RemoveAll(dir)
			}
		})
	}
}
