// Package cijob runs the template's CI jobs as a forge would, for tests
// and benchmarks: it reads a GitHub Actions workflow's step or a GitLab CI
// job's script as written in fleet-repo-template/, with the variables the
// file sets, runs it with bash in a checkout, and (Forge) starts runs the
// way a concurrency group (GitHub) or a resource group (GitLab) does: one
// at a time, in order, with at most one run waiting. CLIOnPath puts the
// test binary itself on the job's PATH as `flotilla` (its TestMain calls
// ServeCLIIfRequested), so a job runs the code under test.
//
//	doc, err := cijob.Load(filepath.Join(template, ".github/workflows/flotilla-rollout.yml"))
//	script, err := cijob.GitHubStep(doc, "advance", "Advance")
//	env := append(os.Environ(), cijob.GitHubEnv(doc)...)
//	out, err := cijob.Run(ctx, checkout, script, env)
package cijob
