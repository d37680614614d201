package cijob

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Load reads a CI definition (a workflow or a GitLab CI file).
func Load(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

// GitHubStep is the run script of the step named step of a GitHub Actions
// workflow's job.
func GitHubStep(doc map[string]any, job, step string) (string, error) {
	for _, s := range GitHubSteps(doc, job) {
		if s["name"] == step {
			if run, ok := s["run"].(string); ok {
				return run, nil
			}
		}
	}
	return "", fmt.Errorf("no step %q with a run script in job %q", step, job)
}

// GitHubSteps are a GitHub Actions job's steps.
func GitHubSteps(doc map[string]any, job string) []map[string]any {
	jobs, _ := doc["jobs"].(map[string]any)
	j, _ := jobs[job].(map[string]any)
	steps, _ := j["steps"].([]any)
	var out []map[string]any
	for _, s := range steps {
		if m, ok := s.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// GitHubStepEnv is the env of the step named step as KEY=value, sorted,
// each ${{ expression }} replaced by what the forge would give it
// (contexts maps the expression, e.g. "github.token", to its value); an
// expression contexts does not hold is an error.
func GitHubStepEnv(doc map[string]any, job, step string, contexts map[string]string) ([]string, error) {
	for _, s := range GitHubSteps(doc, job) {
		if s["name"] != step {
			continue
		}
		env, _ := s["env"].(map[string]any)
		out := vars(env)
		for i, kv := range out {
			k, v, _ := strings.Cut(kv, "=")
			for {
				start := strings.Index(v, "${{")
				if start < 0 {
					break
				}
				end := strings.Index(v[start:], "}}")
				if end < 0 {
					return nil, fmt.Errorf("step %q: %s: unterminated expression", step, k)
				}
				expr := strings.TrimSpace(v[start+3 : start+end])
				val, ok := contexts[expr]
				if !ok {
					return nil, fmt.Errorf("step %q: %s: no value for ${{ %s }}", step, k, expr)
				}
				v = v[:start] + val + v[start+end+2:]
			}
			out[i] = k + "=" + v
		}
		return out, nil
	}
	return nil, fmt.Errorf("no step %q in job %q", step, job)
}

// GitHubEnv is a workflow's top-level env as KEY=value, sorted.
func GitHubEnv(doc map[string]any) []string {
	env, _ := doc["env"].(map[string]any)
	return vars(env)
}

// GitLabScript is a GitLab CI job's script entries as one shell script.
func GitLabScript(doc map[string]any, job string) (string, error) {
	j, _ := doc[job].(map[string]any)
	lines, _ := j["script"].([]any)
	var sb strings.Builder
	for _, l := range lines {
		s, ok := l.(string)
		if !ok {
			return "", fmt.Errorf("job %q: script entry %v is not a string", job, l)
		}
		sb.WriteString(s + "\n")
	}
	if sb.Len() == 0 {
		return "", fmt.Errorf("no job %q with a script", job)
	}
	return sb.String(), nil
}

// GitLabVariables are a GitLab CI job's variables as KEY=value, sorted.
func GitLabVariables(doc map[string]any, job string) []string {
	j, _ := doc[job].(map[string]any)
	v, _ := j["variables"].(map[string]any)
	return vars(v)
}

func vars(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(out)
	return out
}

// Run runs script with bash -e in dir, as a CI runner runs a step, and
// returns its combined output.
func Run(ctx context.Context, dir, script string, env []string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("job script: %w", err)
	}
	return out.String(), err
}

// Forge starts runs of a job as a forge does for a concurrency group
// with cancel-in-progress false (GitHub) or a resource group (GitLab):
// one run at a time, in the order triggered; a trigger while one runs
// leaves one run waiting, which a newer trigger replaces (GitHub keeps
// one pending run per group).
type Forge struct {
	run func(ctx context.Context, n int) error

	mu      sync.Mutex
	ctx     context.Context
	running bool
	waiting bool
	started int
	errs    []error
	idle    *sync.Cond
}

// NewForge makes a Forge whose runs call run with their number (from 1);
// ctx ends them.
func NewForge(ctx context.Context, run func(ctx context.Context, n int) error) *Forge {
	f := &Forge{run: run, ctx: ctx}
	f.idle = sync.NewCond(&f.mu)
	return f
}

// Trigger starts a run, or leaves one waiting while one runs.
func (f *Forge) Trigger() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running {
		f.waiting = true
		return
	}
	f.running = true
	go f.loop()
}

func (f *Forge) loop() {
	for {
		f.mu.Lock()
		f.started++
		n := f.started
		f.mu.Unlock()
		err := f.run(f.ctx, n)
		f.mu.Lock()
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("run %d: %w", n, err))
		}
		if !f.waiting || f.ctx.Err() != nil {
			f.running, f.waiting = false, false
			f.idle.Broadcast()
			f.mu.Unlock()
			return
		}
		f.waiting = false
		f.mu.Unlock()
	}
}

// Wait waits until no run is running or waiting and returns how many
// runs started and their errors.
func (f *Forge) Wait() (int, []error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.running {
		f.idle.Wait()
	}
	return f.started, append([]error(nil), f.errs...)
}

// Busy says whether a run is running or waiting.
func (f *Forge) Busy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running
}
