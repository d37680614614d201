package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrComponentExited reports a component process that terminated while the
// cluster still needed it (typically during start-up: a bad flag or a port
// taken by another process).
var ErrComponentExited = errors.New("component exited")

// ComponentExitedError carries which component exited and the tail of its log.
type ComponentExitedError struct {
	Component string
	Err       error // the exit status from os/exec
	LogTail   string
}

func (e *ComponentExitedError) Error() string {
	return fmt.Sprintf("%s exited: %v\n--- last lines of %s log ---\n%s", e.Component, e.Err, e.Component, e.LogTail)
}

// Unwrap lets callers match the sentinel with errors.Is.
func (e *ComponentExitedError) Unwrap() error { return ErrComponentExited }

// stopGrace is how long a component gets to exit after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// process is one running component binary, in its own process group.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has been reaped
	waitErr error         // valid after done is closed
}

// registry tracks every live component of this OS process so that an
// interrupt (Ctrl-C, SIGTERM from `go test` or CI) kills them all before the
// test binary dies. Pdeathsig covers the binary being SIGKILLed or crashing.
var registry = struct {
	sync.Mutex
	procs map[*process]struct{}
	once  sync.Once
}{procs: map[*process]struct{}{}}

func register(p *process) {
	registry.once.Do(installSignalHandler)
	registry.Lock()
	registry.procs[p] = struct{}{}
	registry.Unlock()
}

func unregister(p *process) {
	registry.Lock()
	delete(registry.procs, p)
	registry.Unlock()
}

// LeaveSignalsToCaller keeps testenv from installing its SIGINT/SIGTERM
// handler (which kills every component and exits), for programs that stop
// their clusters themselves on a signal. Call it before starting a cluster.
func LeaveSignalsToCaller() { registry.once.Do(func() {}) }

func installSignalHandler() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-ch
		KillAll()
		// Die of the same signal, as the process would have without our handler.
		signal.Reset(sig)
		if s, ok := sig.(syscall.Signal); ok {
			_ = syscall.Kill(os.Getpid(), s)
		}
		os.Exit(130)
	}()
}

// KillAll SIGKILLs the process group of every component started by this
// process. It is safe to call at any time; clusters become unusable.
func KillAll() {
	registry.Lock()
	procs := make([]*process, 0, len(registry.procs))
	for p := range registry.procs {
		procs = append(procs, p)
	}
	registry.Unlock()
	for _, p := range procs {
		p.signal(syscall.SIGKILL)
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
		}
	}
}

// startProcess launches bin with args, stdout and stderr written to logPath.
// extraEnv entries are appended to this process's environment.
func startProcess(name, logPath, bin string, extraEnv []string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), extraEnv...)
	// A process group of its own lets us signal the component and anything it
	// forks at once; Pdeathsig kills it if this process dies without cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := spawn(cmd); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	register(p)
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pdeathsig fires when the *thread* that forked the child exits, and the Go
// runtime ends threads whose goroutine exits while locked to them. Forking
// every component from one goroutine locked for good to its own thread makes
// "parent thread died" mean "this process died".
var (
	spawnOnce     sync.Once
	spawnRequests = make(chan spawnRequest)
)

type spawnRequest struct {
	cmd  *exec.Cmd
	errc chan<- error
}

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked, see above
			for r := range spawnRequests {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawnRequests <- spawnRequest{cmd: cmd, errc: errc}
	return <-errc
}

func (p *process) signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	// Negative pid addresses the whole process group.
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs and reaps.
func (p *process) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.signal(syscall.SIGKILL)
		<-p.done
	}
	unregister(p)
}

// exitedError returns a ComponentExitedError if the process has terminated.
func (p *process) exitedError() error {
	select {
	case <-p.done:
		return &ComponentExitedError{Component: p.name, Err: p.waitErr, LogTail: tailFile(p.logPath, 30)}
	default:
		return nil
	}
}

// tailFile returns the last n lines of path (reading at most its last 256 KiB).
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const maxRead = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxRead {
		if _, err := f.Seek(st.Size()-maxRead, io.SeekStart); err != nil {
			return fmt.Sprintf("(cannot read %s: %v)", path, err)
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := strings.Split(string(data), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
