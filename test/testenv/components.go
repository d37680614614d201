package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func (c *Cluster) startEtcd(pt ports) (*process, error) {
	client := "http://" + loopback(pt.etcdClient)
	peer := "http://" + loopback(pt.etcdPeer)
	return c.launch(Etcd,
		"--name=testenv",
		"--data-dir="+c.etcdDataDir(),
		"--listen-client-urls="+client,
		"--advertise-client-urls="+client,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=testenv="+peer,
		"--initial-cluster-state=new",
		// Test data is thrown away: durability only costs time.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
}

func (c *Cluster) startAPIServer(pt ports) (*process, error) {
	args := []string{
		"--etcd-servers=http://" + loopback(pt.etcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(pt.apiserver),
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver-certs"),
		"--tls-cert-file=" + c.pki.servingCert,
		"--tls-private-key-file=" + c.pki.servingK,
		"--client-ca-file=" + c.pki.caCert,
		"--token-auth-file=" + c.tokenFile(),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki.saPub,
		"--service-account-signing-key-file=" + c.pki.saKey,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
	}
	args = append(args, c.opts.ExtraAPIServerFlags...)
	return c.launch(KubeAPIServer, args...)
}

// controllerKubeconfigArgs points a control-plane component at the apiserver
// as AdminUser, also for delegated authn/authz of its own /healthz server.
func (c *Cluster) controllerKubeconfigArgs() []string {
	kc := c.AdminKubeconfig()
	return []string{"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc}
}

// nodeMonitorGrace is how long a node may go without a heartbeat before
// the node lifecycle controller calls it unreachable.
const nodeMonitorGrace = time.Hour

func (c *Cluster) startKCM(pt ports) (*process, error) {
	args := append(c.controllerKubeconfigArgs(),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(pt.kcm),
		"--cert-dir="+filepath.Join(c.Dir, "kcm-certs"),
		"--controllers=*",
		"--cluster-name="+safeName(c.Name),
		"--service-account-private-key-file="+c.pki.saKey,
		"--root-ca-file="+c.pki.caCert,
		"--cluster-signing-cert-file="+c.pki.caCert,
		"--cluster-signing-key-file="+c.pki.caKey,
		"--service-cluster-ip-range="+serviceCIDR,
		// kwok heartbeats every 20–45 s; on a busy machine it can miss the
		// default 50 s grace, and then the node lifecycle controller taints
		// the node and sets its pods Ready=False, which kwok never undoes
		// for a Running pod: a Deployment stays unavailable for good. Fake
		// nodes do not fail; only starvation would make them look so.
		"--node-monitor-grace-period="+nodeMonitorGrace.String(),
	)
	return c.launch(KubeControllerManager, args...)
}

func (c *Cluster) startScheduler(pt ports) (*process, error) {
	args := append(c.controllerKubeconfigArgs(),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(pt.scheduler),
	)
	return c.launch(KubeScheduler, args...)
}

func (c *Cluster) startKwok() (*process, error) {
	stages, err := globTool("kwok-stages/*.yaml")
	if err != nil {
		return nil, err
	}
	if stages, err = c.withKeepRunning(stages); err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + c.AdminKubeconfig(),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=" + kwokNodeValue,
		"--cidr=10.244.0.1/16",
		"--node-ip=10.243.0.1",
	}
	for _, s := range stages {
		args = append(args, "--config="+s)
	}
	// kwok also reads ~/.kwok/kwok.yaml when it exists; a HOME of its own
	// keeps a developer's personal kwok config out of the cluster.
	home := filepath.Join(c.Dir, "kwok-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("kwok home: %w", err)
	}
	return c.launchEnv(Kwok, []string{"HOME=" + home}, args...)
}
