package testenv

import (
	"fmt"
	"net"
	"sync"
)

// handedOut remembers every port given to a component by this process, so
// clusters started in parallel never receive the same port even when the
// kernel hands a just-closed ephemeral port out again. Collisions with other
// processes remain possible; New retries the start when a component exits early.
var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// freePorts returns n distinct loopback TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var (
		ports     []int
		listeners []net.Listener
	)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts > 100*n {
			return nil, fmt.Errorf("no free loopback ports after %d attempts", attempts)
		}
		// Holding every listener until all n are chosen keeps them distinct.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		listeners = append(listeners, l)
		port := l.Addr().(*net.TCPAddr).Port
		if handedOut[port] {
			continue
		}
		handedOut[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}
