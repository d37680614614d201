package cmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/hub/bootstrap"
	"github.com/flotilla-gitops/flotilla/pkg/plural"
)

type initOptions struct {
	force  bool
	git    bool
	branch string
}

func newInitCommand() *cobra.Command {
	o := &initOptions{}
	c := &cobra.Command{
		Use:   "init DIR",
		Short: "Create a fleet repo from the Flotilla template",
		Long: `init writes a ready fleet repo into DIR: three example clusters (member1,
member2, edge-1), six fleets, eight applications with their sources, a canary
route, an admission policy, a GPU batch job (a Volcano GlobalJob), the
vendored charts and the rendered slices, plus
a README explaining the layout, CI definitions and a CODEOWNERS example.
The template is built into this binary, so init works offline.

DIR is created if it does not exist. A directory that already holds
anything is refused unless --force, which overwrites files of the same name
and leaves the others alone. With --git, DIR becomes a Git repository whose
first commit (on --branch) holds the template; author and email come from
your Git configuration.

Next: replace the example clusters with yours (flotilla bootstrap registers
one and prints its agent's install manifests), edit apps/, run
flotilla render, commit and push.`,
		Example: `  # A new fleet repo, committed and ready to push
  flotilla init ./fleet --git
  cd fleet && git remote add origin https://git.example.com/platform/fleet.git && git push -u origin main

  # Into an existing, non-empty checkout (template files win)
  flotilla init . --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runInit(c, args[0], o)
		},
	}
	f := c.Flags()
	f.BoolVar(&o.force, "force", false, "write into a directory that is not empty")
	f.BoolVar(&o.git, "git", false, "make DIR a Git repository with the template as its first commit")
	f.StringVar(&o.branch, "branch", bootstrap.DefaultBranch, "branch of the first commit (with --git)")
	return c
}

func runInit(c *cobra.Command, dir string, o *initOptions) error {
	res, err := bootstrap.Init(c.Context(), dir, bootstrap.InitOptions{Force: o.force, Git: o.git, Branch: o.branch})
	if err != nil {
		return err
	}
	out := c.OutOrStdout()
	fmt.Fprintf(out, "Created a fleet repo in %s (%s).\n", dir, plural.Count(len(res.Files), "file", "files"))
	if res.Commit != "" {
		fmt.Fprintf(out, "Committed them on branch %s as %s.\n", o.branch, shortHash(res.Commit))
	}
	printInitNextSteps(out, dir, res.Commit != "")
	return nil
}

func printInitNextSteps(w io.Writer, dir string, committed bool) {
	fmt.Fprintln(w, "\nNext:")
	fmt.Fprintf(w, "  flotilla validate --repo %s\n", dir)
	fmt.Fprintf(w, "  flotilla bootstrap CLUSTER --repo %s --label env=production --repo-url URL\n", dir)
	fmt.Fprintf(w, "  flotilla render --repo %s\n", dir)
	if !committed {
		fmt.Fprintf(w, "  git -C %s init && git -C %s add -A && git -C %s commit -m 'Fleet repo'\n", dir, dir, dir)
	}
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
