// Package testenv owns the real Kubernetes clusters that Flotilla's tests
// (and `make demo`) run against: etcd, kube-apiserver and, in Full mode,
// kube-controller-manager, kube-scheduler, kwok fake nodes and Volcano, all
// started from the pinned binaries in bin/ (built by `make tools`) on
// loopback with free ports. Nothing here is a fake of the API server.
//
// # Use
//
//	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
//	c.Client()               // controller-runtime client, admin, Volcano types registered
//	c.RESTConfig()           // *rest.Config, admin
//	c.AdminKubeconfig()      // path; user AdminUser in system:masters
//	c.RestrictedKubeconfig() // path; user RestrictedUser without any RBAC binding
//	c.KubeconfigFor(user, token)
//
// c.StopAPIServer() and c.StartAPIServer(ctx) simulate a control-plane
// outage: the apiserver goes away and comes back on the same port with the
// same etcd, certificates and tokens, so clients and kubeconfigs made
// before it keep working.
//
// Outside tests, New(ctx, name, dir, opts) starts a cluster and Stop ends it.
// N clusters are N calls (or StartClusters); each has its own etcd and
// apiserver, and starts are safe to run concurrently.
//
// # Identity and security
//
// Every cluster has its own CA, apiserver serving certificate (127.0.0.1,
// localhost and the in-cluster names) and service-account signing key,
// generated with crypto/x509. Authentication is a static token file holding
// AdminUser, RestrictedUser and ClusterOptions.Users; authorization is
// Node,RBAC, so tests exercise real permission checks by granting RBAC to
// RestrictedUser or to ServiceAccounts (whose TokenRequest tokens work with
// RESTConfigFor/KubeconfigFor).
//
// # Full mode
//
// kwok manages only Nodes annotated kwok.x-k8s.io/node=fake, using the stage
// files in bin/kwok-stages (nodes become Ready, pods on them Running). Nodes
// are described with NodeSpec (Nodes, GPUNodes helpers; nvidia.com/gpu is an
// extended resource in the node status). Readiness means: apiserver /readyz,
// controller-manager and scheduler /healthz, the default ServiceAccount
// present, every node Ready, and with Volcano its CRDs Established, both
// Volcano components healthy and the "default" queue Open.
//
// # Volcano without its admission webhook
//
// Volcano v1.10 runs here without vc-webhook-manager, so nothing fills in
// the defaults its mutating webhook would. A batch.volcano.sh Job must set
// them explicitly: spec.schedulerName ("volcano"), spec.queue ("default"),
// spec.minAvailable, spec.maxRetry, and per task a name, minAvailable and
// maxRetry. Nor does anything validate Jobs; invalid ones fail in the
// controller instead of at admission. The job controller creates a Job's
// pods only once the scheduler has moved its PodGroup out of Pending
// (Inqueue), so a gang that cannot fit has a Pending PodGroup and no pods.
// Volcano sums the pod template *requests* into the PodGroup's
// minResources: give extended resources such as nvidia.com/gpu an explicit
// request (not only a limit), or an over-sized gang is let into the queue,
// gets its pods created, and only then fails to allocate.
//
// # Pods of Jobs
//
// kwok's pod-fast stages complete every Running pod owned by a Job (batch/v1
// or Volcano) immediately, so jobs reach Completed within seconds. Put
// KeepRunningAnnotation on a pod template to keep its pods Running instead.
//
// # Process hygiene
//
// Each component runs in its own process group with Pdeathsig SIGKILL, so it
// dies with the test binary even on a crash or timeout panic. Stop (and
// StartCluster's cleanup) sends SIGTERM and SIGKILL after a grace period; a
// package-level registry SIGKILLs every component when the process receives
// SIGINT or SIGTERM. Component logs go to <dir>/logs/<component>.log; when a
// test fails, StartCluster's cleanup prints the last lines of each.
package testenv
