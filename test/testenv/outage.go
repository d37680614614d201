package testenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// ErrAPIServerStopped reports StopAPIServer on a cluster whose apiserver is
// not running, or StartAPIServer on one whose apiserver still runs.
var ErrAPIServerStopped = errors.New("kube-apiserver state")

// StopAPIServer stops the cluster's kube-apiserver (SIGTERM, SIGKILL after a
// grace period) and leaves etcd and every other component running, to
// simulate a control-plane outage. StartAPIServer brings it back.
func (c *Cluster) StopAPIServer() error {
	p := c.proc(KubeAPIServer)
	if p == nil || p.exitedError() != nil {
		return fmt.Errorf("stop %s of cluster %s: %w: not running", KubeAPIServer, c.Name, ErrAPIServerStopped)
	}
	p.stop(stopGrace)
	return nil
}

// StartAPIServer starts the kube-apiserver again with the same etcd, port,
// certificates and tokens, so kubeconfigs and clients made before the
// outage stay valid, and waits for /readyz. The previous run's log is kept
// (as kube-apiserver.log.<n>) so both runs can be read.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if p := c.proc(KubeAPIServer); p != nil && p.exitedError() == nil {
		return fmt.Errorf("start %s of cluster %s: %w: already running", KubeAPIServer, c.Name, ErrAPIServerStopped)
	}
	if err := c.keepLog(KubeAPIServer); err != nil {
		return err
	}
	// The port was released a moment ago; binding it again can briefly fail
	// (and another process may take it: that is ErrComponentExited).
	var apiserver *process
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if apiserver, err = c.startAPIServer(c.ports); err != nil {
			return err
		}
		err = poll(ctx, "kube-apiserver /readyz after restart",
			httpProbe(c.host+"/readyz", c.pki.caPEM, c.tokens[AdminUser]), apiserver, c.proc(Etcd))
		if err == nil || !errors.Is(err, ErrComponentExited) || apiserver.exitedError() == nil {
			break
		}
		if err := c.keepLog(KubeAPIServer); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("restart %s: %w", KubeAPIServer, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		return fmt.Errorf("restart %s of cluster %s: %w", KubeAPIServer, c.Name, err)
	}
	return nil
}

// keepLog moves a component's log aside (to <component>.log.<n>, the first
// free n) before the component is started again, which truncates it.
func (c *Cluster) keepLog(component string) error {
	cur := c.logPath(component)
	if _, err := os.Stat(cur); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for n := 1; ; n++ {
		old := cur + "." + strconv.Itoa(n)
		if _, err := os.Stat(old); errors.Is(err, fs.ErrNotExist) {
			if err := os.Rename(cur, old); err != nil {
				return fmt.Errorf("keep %s log: %w", component, err)
			}
			return nil
		}
	}
}
