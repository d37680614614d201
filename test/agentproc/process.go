package agentproc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Options configure a flotilla-agent process.
type Options struct {
	// Name is the agent's name in messages and its log file's; "agent"
	// when empty.
	Name string
	// Args are the agent's flags. Log records are read as JSON: pass
	// --log-format json.
	Args []string
	// ExtraArgsEnv names an environment variable whose words are appended
	// to Args (e.g. FLOTILLA_BENCH_AGENT_ARGS="--workers 16").
	ExtraArgsEnv string
	// CacheDir is the agent's --cache-dir, where Status reads status.yaml.
	CacheDir string
	// Bin is the binary; Binary(t) when empty.
	Bin string
	// LogTail is how many of the log's last lines a failed test shows; 40
	// when zero, none when negative.
	LogTail int
	// Env is added to the test's environment (e.g. GODEBUG=gctrace=1,
	// which PeakHeap reads).
	Env []string
}

// Process is a running flotilla-agent.
type Process struct {
	t        testing.TB
	name     string
	cacheDir string
	logPath  string
	cmd      *exec.Cmd
	started  time.Time
	done     chan struct{}
	exitCode int // valid once done is closed
}

// Start runs the agent with o.Args, stdout and stderr to <temp>/<name>.log.
// The process is SIGKILLed when the test ends (and if the test binary dies).
func Start(t testing.TB, o Options) *Process {
	t.Helper()
	if o.Name == "" {
		o.Name = "agent"
	}
	if o.Bin == "" {
		o.Bin = Binary(t)
	}
	if o.LogTail == 0 {
		o.LogTail = 40
	}
	args := o.Args
	if o.ExtraArgsEnv != "" {
		if extra := os.Getenv(o.ExtraArgsEnv); extra != "" {
			args = append(args[:len(args):len(args)], strings.Fields(extra)...)
		}
	}
	p := &Process{t: t, name: o.Name, cacheDir: o.CacheDir, logPath: filepath.Join(t.TempDir(), o.Name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(o.Bin, args...)
	if len(o.Env) > 0 {
		p.cmd.Env = append(os.Environ(), o.Env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// Never outlive the test binary.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		logFile.Close()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.exitCode = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() && o.LogTail > 0 {
			t.Logf("agent %s log (tail):\n%s", p.name, p.LogTail(o.LogTail))
		}
	})
	return p
}

// Name is Options.Name.
func (p *Process) Name() string { return p.name }

// Started is when the process was started.
func (p *Process) Started() time.Time { return p.started }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file holding the agent's output.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Process) Kill() {
	if p.Running() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// Stop sends SIGTERM and returns the exit code; the test fails when the
// process has not ended within timeout.
func (p *Process) Stop(timeout time.Duration) int {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitCode
	case <-time.After(timeout):
		p.t.Fatalf("agent %s did not stop within %s of SIGTERM", p.name, timeout)
		return -1
	}
}

// PeakRSS is the ended process's peak resident set in bytes (rusage).
func (p *Process) PeakRSS() int64 {
	<-p.done
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return int64(ru.Maxrss) * 1024
	}
	return 0
}

// StatusKiB reads a kB field of the running process's /proc/<pid>/status
// (VmRSS, VmHWM, RssAnon, RssFile); 0 when it cannot be read.
func (p *Process) StatusKiB(field string) int64 { return statusKiB(p.Pid(), field) }

func statusKiB(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// ResetPeakRSS starts the process's VmHWM again from its current
// resident set (Linux clear_refs), so a phase can read its own peak.
func (p *Process) ResetPeakRSS() error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.Pid()), []byte("5"), 0)
}

// TreeRSSKiB is the resident set of the running process and of every
// process it started (its Helm workers), in kB: what a container's memory
// limit counts. 0 when the process has ended.
func (p *Process) TreeRSSKiB() int64 {
	var total int64
	pids := []int{p.Pid()}
	for len(pids) > 0 {
		pid := pids[0]
		pids = pids[1:]
		total += statusKiB(pid, "VmRSS")
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, task := range tasks {
			children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
			for _, f := range strings.Fields(string(children)) {
				if child, err := strconv.Atoi(f); err == nil {
					pids = append(pids, child)
				}
			}
		}
	}
	return total
}

// MappedKiB sums the resident kB of the running process's mappings of
// file path (/proc/<pid>/smaps), e.g. of its executable (Binary).
func (p *Process) MappedKiB(path string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", p.Pid()))
	if err != nil {
		return 0
	}
	var total int64
	inFile := false
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			// A mapping header: address perms offset dev inode [path].
			inFile = len(fields) >= 6 && fields[5] == path
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Rss:"); ok && inFile {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			total += n
		}
	}
	return total
}

// PeakHeap is the largest Go heap the process had at any garbage
// collection, in bytes, from the runtime's GODEBUG=gctrace=1 lines in its
// log (start the process with that in Options.Env); 0 when there are none.
// Unlike PeakRSS it counts what the program held, not its executable's
// pages or memory the runtime has not returned to the OS yet.
func (p *Process) PeakHeap() int64 {
	data, _ := os.ReadFile(p.logPath)
	var peak int64
	for line := range strings.Lines(string(data)) {
		// "gc 7 @1.2s 0%: …, 4->5->2 MB, 5 MB goal, …"
		m := gctraceHeap.FindStringSubmatch(line)
		for _, v := range m[min(1, len(m)):] {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n<<20 > peak {
				peak = n << 20
			}
		}
	}
	return peak
}

var gctraceHeap = regexp.MustCompile(`^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

// Records returns the JSON log records with message msg, or all of them
// when msg is "".
func (p *Process) Records(msg string) []map[string]any {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		rec := map[string]any{}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && (msg == "" || rec["msg"] == msg) {
			out = append(out, rec)
		}
	}
	return out
}

// Count is the number of log records with message msg.
func (p *Process) Count(msg string) int { return len(p.Records(msg)) }

// LogTail returns the last n lines of the log.
func (p *Process) LogTail(n int) string {
	data, _ := os.ReadFile(p.logPath)
	return Tail(string(data), n)
}

// ListenAddr is the address the agent logged for server ("metrics",
// "probes", "pprof"), if it has.
func (p *Process) ListenAddr(server string) (string, bool) {
	for _, r := range p.Records("listening") {
		if r["server"] == server {
			addr, ok := r["addr"].(string)
			return addr, ok
		}
	}
	return "", false
}

// Addr waits up to a minute (generous, for a busy machine) for the address
// the agent logs for server.
func (p *Process) Addr(server string) string {
	p.t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if addr, ok := p.ListenAddr(server); ok {
			return addr
		}
	}
	p.t.Fatalf("agent %s logged no %s address within a minute:\n%s", p.name, server, p.LogTail(30))
	return ""
}

// Get requests path from the agent's server ("metrics" or "probes") and
// returns the status code and body (code 0 and the error on failure).
func (p *Process) Get(server, path string) (int, string) {
	p.t.Helper()
	resp, err := http.Get("http://" + p.Addr(server) + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Metric returns the value of the /metrics line "name value" (name with
// its labels, if any).
func (p *Process) Metric(name string) (float64, bool) {
	p.t.Helper()
	code, body := p.Get("metrics", "/metrics")
	if code != http.StatusOK {
		return 0, false
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// Cycles is the number of cycles the agent has logged as finished.
func (p *Process) Cycles() int { return p.Count("cycle finished") }

// WaitCycle waits for the (n+1)-th "cycle finished" record and returns it;
// the test fails when the agent exits or timeout passes first.
func (p *Process) WaitCycle(n int, timeout time.Duration) map[string]any {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if recs := p.Records("cycle finished"); len(recs) > n {
			return recs[n]
		}
		select {
		case <-p.done:
			p.t.Fatalf("agent %s exited:\n%s", p.name, p.LogTail(30))
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("agent %s: no cycle %d after %s:\n%s", p.name, n+1, timeout, p.LogTail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Status reads the status file in Options.CacheDir; nil before the first
// cycle has written it.
func (p *Process) Status() *status.ClusterStatus {
	st, err := ReadStatus(p.cacheDir)
	if err != nil {
		return nil
	}
	return st
}

// ReadStatus reads the status file the agent writes into its cache
// directory.
func ReadStatus(cacheDir string) (*status.ClusterStatus, error) {
	return reconcile.ReadStatusFile(StatusFile(cacheDir))
}

// StatusFile is the agent's status file in cacheDir.
func StatusFile(cacheDir string) string { return filepath.Join(cacheDir, "status.yaml") }

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
