package cmd

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/flotilla-gitops/flotilla/agent/procmem"
	"github.com/flotilla-gitops/flotilla/pkg/render"
)

// releaseMemory runs after every cycle: the heap's free pages and the
// executable pages the cycle faulted in (render, apply) go back, so the
// idle agent's resident set is what its polls and drift checks use.
func releaseMemory(log *slog.Logger) {
	r, err := procmem.Release()
	if err != nil {
		log.Debug("releasing memory", "error", err)
		return
	}
	log.Debug("memory released", "executablePagesMiB", r.ExecutableBytes>>20)
}

// autoMemory is --helm-worker-memory's default.
const autoMemory = "auto"

// cgroupLimitFiles are where a container's memory limit is read, cgroup v2
// first. A file that is missing, says "max" or holds v1's "no limit" value
// (a page-rounded MaxInt64) means no limit.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// containerMemoryLimit reports the memory limit of the cgroup this process
// runs in, if it has one.
func containerMemoryLimit() (int64, bool) {
	for _, f := range cgroupLimitFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0, false // "max", or v1's unlimited
		}
		return n, true
	}
	return 0, false
}

// helmWorkerMemory resolves --helm-worker-memory to bytes. "auto" keeps the
// Helm workers inside the container: up to render.MaxWorkers() of them run
// at once beside the agent, and together they may use half of the limit,
// so a runaway chart is stopped by this bound (its unit fails with "helm
// template used more than N MiB") before the kernel's OOM killer would
// stop the agent. Without a limit, render's default applies.
func helmWorkerMemory(flag string, limit func() (int64, bool)) (int64, error) {
	if flag == "" || flag == autoMemory {
		if l, ok := limit(); ok {
			return l / int64(2*render.MaxWorkers()), nil
		}
		return render.DefaultMaxHelmMemory, nil
	}
	q, err := resource.ParseQuantity(flag)
	if err != nil {
		return 0, fmt.Errorf("--helm-worker-memory %q: %w", flag, err)
	}
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("--helm-worker-memory %q: must be positive", flag)
	}
	return q.Value(), nil
}

// gitMaxFetchSize resolves --git-max-fetch-size to bytes for
// gitrepo.Source.MaxFetchSize.
func gitMaxFetchSize(flag string) (int64, error) {
	q, err := resource.ParseQuantity(flag)
	if err != nil {
		return 0, fmt.Errorf("--git-max-fetch-size %q: %w", flag, err)
	}
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("--git-max-fetch-size %q: must be positive", flag)
	}
	return q.Value(), nil
}
