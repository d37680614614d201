package plan

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/flotilla-gitops/flotilla/pkg/plural"
	"github.com/flotilla-gitops/flotilla/pkg/render"
)

// Output formats.
const (
	FormatText     = "text"
	FormatMarkdown = "markdown"
	FormatJSON     = "json"
)

// DefaultMaxBytes keeps Markdown under GitHub's 65,536-character comment
// limit with room for a header the CI step may add.
const DefaultMaxBytes = 60000

// FormatOptions tune Write.
type FormatOptions struct {
	// Color adds ANSI colours to text (for a terminal).
	Color bool
	// MaxBytes bounds Markdown; DefaultMaxBytes when zero.
	MaxBytes int
}

// Write prints the plan in format (text, markdown or json).
func Write(w io.Writer, p *Plan, format string, opts FormatOptions) error {
	switch format {
	case FormatText:
		return WriteText(w, p, opts.Color)
	case FormatMarkdown:
		_, err := io.WriteString(w, Markdown(p, opts.MaxBytes))
		return err
	case FormatJSON:
		return WriteJSON(w, p)
	}
	return fmt.Errorf("plan: unknown format %q (want text, markdown or json)", format)
}

// WriteJSON prints the plan as indented JSON (see the package doc).
func WriteJSON(w io.Writer, p *Plan) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(p)
}

func sideLabel(r Revision) string {
	if r.Commit == "" {
		return r.Ref
	}
	return fmt.Sprintf("%s (%s)", r.Ref, short(r.Commit))
}

// countsLine is "units +1 −0 ~2, objects +3 −0 ~4".
func countsLine(c Counts) string {
	return fmt.Sprintf("units +%d −%d ~%d, objects +%d −%d ~%d",
		c.UnitsAdded, c.UnitsRemoved, c.UnitsChanged, c.ObjectsAdded, c.ObjectsRemoved, c.ObjectsChanged)
}

func changeMark(c Change) string {
	switch c {
	case Added:
		return "+"
	case Removed:
		return "-"
	}
	return "~"
}

func capsLine(c Capabilities) string {
	switch c.Source {
	case FromStatus:
		return fmt.Sprintf("Kubernetes %s from the agent's status", c.KubeVersion)
	case FromCluster:
		if c.KubeVersion == render.DefaultKubeVersion && c.APIVersions > 0 {
			return fmt.Sprintf("Kubernetes %s (Flotilla's default), API versions from the Cluster file", c.KubeVersion)
		}
		return fmt.Sprintf("Kubernetes %s from the Cluster file", c.KubeVersion)
	}
	return fmt.Sprintf("Kubernetes %s by default (none reported or declared)", c.KubeVersion)
}

// ANSI colours for text on a terminal.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

type painter bool

func (p painter) paint(code, s string) string {
	if !p || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (p painter) mark(c Change, s string) string {
	switch c {
	case Added:
		return p.paint(ansiGreen, s)
	case Removed:
		return p.paint(ansiRed, s)
	}
	return p.paint(ansiYellow, s)
}

// hooksTitle heads a unit's Helm hooks, which are not applied as objects.
const hooksTitle = "Helm hooks (run by the agent around the unit's apply, not kept as its objects):"

// WriteText prints the plan for a terminal or a CI log.
func WriteText(w io.Writer, p *Plan, color bool) error {
	bw := bufio.NewWriter(w)
	c := painter(color)
	fmt.Fprintf(bw, "%s %s → %s\n", c.paint(ansiBold, "Plan:"), sideLabel(p.Base), sideLabel(p.Head))
	if p.Empty() {
		fmt.Fprintln(bw, "No changes: every cluster gets the same objects.")
	} else {
		fmt.Fprintf(bw, "%s change: %s\n", plural.Count(p.Summary.Clusters, "cluster", "clusters"), countsLine(p.Summary))
	}
	if len(p.Notes) > 0 {
		fmt.Fprintln(bw, "\nMoves between clusters:")
		for _, n := range p.Notes {
			fmt.Fprintf(bw, "  %s\n", n)
		}
	}
	if len(p.Ownership) > 0 {
		fmt.Fprintln(bw, "\nOwnership:")
		for _, n := range p.Ownership {
			fmt.Fprintf(bw, "  %s\n", n)
		}
	}
	if len(p.Warnings) > 0 {
		fmt.Fprintln(bw)
		for _, wn := range p.Warnings {
			fmt.Fprintf(bw, "%s %s\n", c.paint(ansiYellow, "warning:"), wn)
		}
	}
	for i := range p.Clusters {
		cp := &p.Clusters[i]
		fmt.Fprintf(bw, "\n%s %s (%s; %s): %s\n", c.mark(cp.Change, changeMark(cp.Change)+" cluster"), c.paint(ansiBold, cp.Name),
			cp.Change, capsLine(cp.Capabilities), countsLine(cp.Counts))
		for j := range cp.Units {
			u := &cp.Units[j]
			fmt.Fprintf(bw, "  %s %s (%s)\n", c.mark(u.Change, changeMark(u.Change)+" unit"), u.Name, u.Kind)
			for _, s := range u.Settings {
				fmt.Fprintf(bw, "      %s\n", s)
			}
			if u.Suspended {
				fmt.Fprintf(bw, "      %s %s\n", c.paint(ansiYellow, "Suspended:"), suspendedText)
			}
			if u.InputsOnly {
				fmt.Fprintf(bw, "      %s\n", inputsOnlyText(u, true))
			}
			if u.Error != "" {
				fmt.Fprintf(bw, "      %s %s\n", c.paint(ansiRed, "render failed at head:"), u.Error)
			}
			if u.BaseError != "" {
				fmt.Fprintf(bw, "      %s %s\n", c.paint(ansiYellow, "render failed at base:"), u.BaseError)
			}
			for k := range u.Objects {
				o := &u.Objects[k]
				fmt.Fprintf(bw, "    %s %s %s\n", c.mark(o.Change, changeMark(o.Change)), o.APIVersion, o.ID())
				for _, line := range splitLines(o.Diff) {
					fmt.Fprintf(bw, "        %s\n", paintDiffLine(c, line))
				}
			}
			if len(u.Hooks) > 0 {
				fmt.Fprintf(bw, "    %s\n", hooksTitle)
			}
			for k := range u.Hooks {
				o := &u.Hooks[k]
				fmt.Fprintf(bw, "    %s %s %s (%s)\n", c.mark(o.Change, changeMark(o.Change)+" hook"), o.APIVersion, o.ID(), o.Hook)
				for _, line := range splitLines(o.Diff) {
					fmt.Fprintf(bw, "        %s\n", paintDiffLine(c, line))
				}
			}
		}
	}
	if p.Failed {
		fmt.Fprintf(bw, "\n%s some units failed to render at head; the agent will fail on them too.\n", c.paint(ansiRed, "error:"))
	}
	return bw.Flush()
}

func paintDiffLine(c painter, line string) string {
	switch {
	case strings.HasPrefix(line, "@@"):
		return c.paint(ansiCyan, line)
	case strings.HasPrefix(line, "+"):
		return c.paint(ansiGreen, line)
	case strings.HasPrefix(line, "-"):
		return c.paint(ansiRed, line)
	}
	return line
}
