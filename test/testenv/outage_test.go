package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAPIServerStopAndStart stops a cluster's kube-apiserver and starts it
// again: requests fail meanwhile; afterwards the client and kubeconfig made
// before the outage work and see the data written before it (same etcd).
func TestAPIServerStopAndStart(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Mode: Minimal})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k := c.Client()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "before-outage"}, Data: map[string]string{"k": "v"}}
	if err := k.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := c.StopAPIServer(); !errors.Is(err, ErrAPIServerStopped) {
		t.Errorf("second StopAPIServer: %v, want ErrAPIServerStopped", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 10*time.Second)
	err := k.Get(short, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	cancelShort()
	if err == nil {
		t.Fatal("Get succeeded while kube-apiserver was stopped")
	}
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.StartAPIServer(ctx); !errors.Is(err, ErrAPIServerStopped) {
		t.Errorf("second StartAPIServer: %v, want ErrAPIServerStopped", err)
	}
	got := &corev1.ConfigMap{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	if got.Data["k"] != "v" {
		t.Errorf("data after restart: %v", got.Data)
	}
}
