package render

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Helm templates are Go templates: they cannot be cancelled, and a chart
// can loop for hours ({{ range 1000000000000 }}) or allocate without bound.
// So Helm templating runs in worker processes — re-executions of the current
// binary — which are killed at the render deadline or when their resident
// memory exceeds Limits.MaxHelmMemory. A killed worker takes nothing with
// it; the next request starts a fresh one. Idle workers exit after a while.

const (
	workerEnv      = "FLOTILLA_RENDER_WORKER"
	workerEnvValue = "helm/v1"
	workerIdle     = 60 * time.Second
	memPoll        = 5 * time.Millisecond
	// maxRequest bounds what a worker accepts (chart + values).
	maxRequest = 1 << 30
)

// workerCapable is set by ServeWorkerIfRequested in a process whose binary
// can act as a worker.
var workerCapable atomic.Bool

// ServeWorkerIfRequested must be the first call of main() (and of TestMain
// in test binaries that render Helm units). In a process started as a Helm
// worker it serves requests and exits; otherwise it returns at once and
// lets Unit run Helm in workers re-executing this binary. A binary that
// never calls it templates Helm in-process, where a template that never
// ends cannot be stopped.
func ServeWorkerIfRequested() {
	if os.Getenv(workerEnv) != workerEnvValue {
		workerCapable.Store(true)
		return
	}
	os.Exit(serveWorker(os.NewFile(3, "requests"), os.NewFile(4, "responses")))
}

// serveWorker is the worker's main loop: one framed request in, one framed
// response out, until the parent closes the request pipe.
func serveWorker(in io.Reader, out io.Writer) int {
	limitAddressSpace()
	r := bufio.NewReader(in)
	for {
		var req helmRequest
		if err := readFrame(r, maxRequest, &req); err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintln(os.Stderr, "render worker:", err)
			return 2
		}
		resp := safeHelmTemplate(&req)
		if err := writeFrame(out, &resp); err != nil {
			fmt.Fprintln(os.Stderr, "render worker:", err)
			return 2
		}
	}
}

// Frames are an 8-byte big-endian length followed by a gob value, so a
// reader can refuse an oversized frame before allocating it.
func writeFrame(w io.Writer, v any) error {
	var buf bytes.Buffer
	buf.Write(make([]byte, 8))
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return err
	}
	b := buf.Bytes()
	binary.BigEndian.PutUint64(b[:8], uint64(len(b)-8))
	_, err := w.Write(b)
	return err
}

func readFrame(r io.Reader, max int64, v any) error {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint64(hdr[:])
	if n > uint64(max) {
		return fmt.Errorf("frame of %d bytes exceeds %d", n, max)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("short frame: %w", err)
	}
	return gob.NewDecoder(bytes.NewReader(buf)).Decode(v)
}

// workerPool hands requests to at most cap(slots) live workers.
type workerPool struct {
	slots chan struct{}
	mu    sync.Mutex
	idle  []*worker
	reap  sync.Once
	spawn func() (*worker, error)
}

var workers = &workerPool{
	slots: make(chan struct{}, MaxWorkers()),
	spawn: startWorker,
}

// MaxWorkers is how many Helm worker processes may run at once: what a
// caller sizing MaxHelmMemory against a container's memory limit must
// multiply by.
func MaxWorkers() int { return max(2, runtime.GOMAXPROCS(0)) }

func (p *workerPool) run(ctx context.Context, req *helmRequest, lim Limits) ([]byte, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, timeoutError(ctx.Err())
	}
	defer func() { <-p.slots }()
	w, err := p.get()
	if err != nil {
		return nil, classed(ErrHelm, "start worker: "+err.Error())
	}
	req.MaxOutput = lim.MaxTotalSize
	resp, err := w.do(ctx, req, lim)
	if err != nil {
		w.stop()
		return nil, err
	}
	p.put(w)
	return responseResult(*resp)
}

func (p *workerPool) get() (*worker, error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		w := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !w.dead() {
			p.mu.Unlock()
			return w, nil
		}
	}
	p.mu.Unlock()
	p.reap.Do(func() { go p.reaper() })
	return p.spawn()
}

func (p *workerPool) put(w *worker) {
	w.lastUsed = time.Now()
	p.mu.Lock()
	p.idle = append(p.idle, w)
	p.mu.Unlock()
}

// reaper stops workers idle for longer than workerIdle, so a quiet agent
// holds no worker memory.
func (p *workerPool) reaper() {
	for range time.Tick(workerIdle / 4) {
		p.mu.Lock()
		keep := p.idle[:0]
		var stale []*worker
		for _, w := range p.idle {
			if time.Since(w.lastUsed) > workerIdle || w.dead() {
				stale = append(stale, w)
			} else {
				keep = append(keep, w)
			}
		}
		p.idle = keep
		p.mu.Unlock()
		for _, w := range stale {
			w.stop()
		}
	}
}

// worker is one child process and its pipes.
type worker struct {
	cmd      *exec.Cmd
	req      *os.File
	resp     *bufio.Reader
	respFile *os.File
	stderr   *tailBuffer
	exited   chan struct{}
	lastUsed time.Time
}

func startWorker() (*worker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	respR, respW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, err
	}
	w := &worker{req: reqW, resp: bufio.NewReader(respR), respFile: respR, stderr: &tailBuffer{max: 4096}, exited: make(chan struct{})}
	w.cmd = exec.Command(exe)
	w.cmd.Env = append(os.Environ(), workerEnv+"="+workerEnvValue)
	w.cmd.ExtraFiles = []*os.File{reqR, respW}
	w.cmd.Stderr = w.stderr
	err = w.cmd.Start()
	reqR.Close()
	respW.Close()
	if err != nil {
		reqW.Close()
		respR.Close()
		return nil, err
	}
	go func() {
		_ = w.cmd.Wait()
		close(w.exited)
	}()
	return w, nil
}

func (w *worker) dead() bool {
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

// stop ends the worker: closing its request pipe makes an idle worker exit;
// the kill covers a busy one.
func (w *worker) stop() {
	w.req.Close()
	if w.cmd.Process != nil {
		_ = w.cmd.Process.Kill()
	}
	<-w.exited
	w.respFile.Close()
}

// do sends one request and waits for its response, the deadline or the
// memory limit, whichever comes first.
func (w *worker) do(ctx context.Context, req *helmRequest, lim Limits) (*helmResponse, error) {
	type outcome struct {
		resp helmResponse
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		if o.err = writeFrame(w.req, req); o.err == nil {
			o.err = readFrame(w.resp, lim.MaxTotalSize+1<<20, &o.resp)
		}
		done <- o
	}()
	var poll <-chan time.Time
	if rssSupported {
		t := time.NewTicker(memPoll)
		defer t.Stop()
		poll = t.C
	}
	for {
		select {
		case o := <-done:
			if o.err != nil {
				return nil, classed(ErrHelm, fmt.Sprintf("helm worker failed: %v%s", o.err, w.exitDetail()))
			}
			return &o.resp, nil
		case <-ctx.Done():
			w.stop()
			<-done
			return nil, timeoutError(ctx.Err())
		case <-poll:
			if rss := residentBytes(w.cmd.Process.Pid); rss > lim.MaxHelmMemory {
				w.stop()
				<-done
				return nil, classed(ErrTooLarge, fmt.Sprintf("helm template used more than %d MiB of memory", lim.MaxHelmMemory>>20))
			}
		}
	}
}

func (w *worker) exitDetail() string {
	select {
	case <-w.exited:
	case <-time.After(time.Second):
		return ""
	}
	msg := w.cmd.ProcessState.String()
	if tail := w.stderr.lastLine(); tail != "" {
		msg += ": " + tail
	}
	return " (worker " + msg + ")"
}

// tailBuffer keeps the last max bytes written to it (a worker's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := bytes.Split(bytes.TrimSpace(t.buf), []byte("\n"))
	return string(lines[len(lines)-1])
}
