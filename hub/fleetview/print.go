package fleetview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/flotilla-gitops/flotilla/pkg/plural"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Output formats of WriteFleet and WriteRollout.
const (
	FormatTable    = "table"
	FormatJSON     = "json"
	FormatYAML     = "yaml"
	FormatMarkdown = "markdown"
)

// Formats lists the output formats.
var Formats = []string{FormatTable, FormatJSON, FormatYAML, FormatMarkdown}

// WriteFleet prints the fleet view in format.
func WriteFleet(w io.Writer, v *View, format string) error {
	switch format {
	case FormatJSON:
		return writeJSON(w, v)
	case FormatYAML:
		return writeYAML(w, v)
	case FormatTable:
		return fleetTable(w, v)
	case FormatMarkdown:
		return fleetMarkdown(w, v)
	}
	return fmt.Errorf("unknown output format %q (want %s)", format, strings.Join(Formats, ", "))
}

// WriteRollout prints a rollout in format.
func WriteRollout(w io.Writer, r *RolloutView, format string) error {
	switch format {
	case FormatJSON:
		return writeJSON(w, r)
	case FormatYAML:
		return writeYAML(w, r)
	case FormatTable:
		return rolloutTable(w, r)
	case FormatMarkdown:
		return rolloutMarkdown(w, r)
	}
	return fmt.Errorf("unknown output format %q (want %s)", format, strings.Join(Formats, ", "))
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeYAML prints v's JSON form as block YAML in field order.
func writeYAML(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var node yaml.Node
	if err := yaml.Unmarshal(raw, &node); err != nil {
		return err
	}
	blockStyle(&node)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&node); err != nil {
		return err
	}
	return enc.Close()
}

// blockStyle turns JSON's flow style into block style, as status.Encode
// does; scalars keep their tag, so a string that would read as another
// type is still quoted.
func blockStyle(n *yaml.Node) {
	n.Style &^= yaml.FlowStyle | yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle
	for _, c := range n.Content {
		blockStyle(c)
	}
}

func summaryLine(v *View) string {
	parts := []string{plural.Count(len(v.Clusters), "cluster", "clusters")}
	for _, s := range AllStates {
		if n := v.Summary[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	return strings.Join(parts, ", ")
}

func revisionCell(c ClusterView) string {
	applied := shortHash(status.RevisionHash(c.AppliedRevision))
	desired := shortHash(status.RevisionHash(c.DesiredRevision))
	switch {
	case applied == "" && desired == "":
		return "-"
	case applied == "":
		return "- → " + desired
	case desired == "" || desired == applied:
		return applied
	}
	return applied + " → " + desired
}

func unitsCell(c ClusterView) string {
	if c.State == StateNoStatus || c.State == StateUntrusted {
		return "-"
	}
	return fmt.Sprintf("%d/%d", c.UnitsReady, c.UnitsTotal)
}

func jobsCell(j JobCounts) string {
	if j.Total == 0 {
		return "0"
	}
	phases := make([]string, 0, len(j.ByPhase))
	for p := range j.ByPhase {
		phases = append(phases, p)
	}
	sort.Strings(phases)
	parts := make([]string, len(phases))
	for i, p := range phases {
		parts[i] = fmt.Sprintf("%d %s", j.ByPhase[p], p)
	}
	return fmt.Sprintf("%d (%s)", j.Total, strings.Join(parts, ", "))
}

func ageCell(c ClusterView) string {
	if c.HeartbeatAge == nil {
		return "never"
	}
	if c.ClockSkew != nil {
		return humanAge(c.ClockSkew.Duration) + " ahead"
	}
	return humanAge(c.HeartbeatAge.Duration) + " ago"
}

func humanAge(d time.Duration) string {
	if d < time.Second {
		return "0s"
	}
	return duration.HumanDuration(d)
}

func fleetsCell(fs []string) string {
	if len(fs) == 0 {
		return "-"
	}
	return strings.Join(fs, ",")
}

func fleetTable(w io.Writer, v *View) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Fleet repo %s at %s: %s\n\n", v.Repo, status.ShortRevision(v.Revision), summaryLine(v))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tFLEETS\tSTATE\tREVISION\tUNITS\tJOBS\tHEARTBEAT\tREASON")
	for _, c := range v.Clusters {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, fleetsCell(c.Fleets), c.State,
			revisionCell(c), unitsCell(c), jobsCell(c.Jobs), ageCell(c), oneLine(c.Reason, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeDetails(&b, v, "", func(s string) string { return s })
	_, err := w.Write(b.Bytes())
	return err
}

// writeDetails lists failing units, untrusted refs, strays and warnings
// below the table; bullet is the list marker and code formats names.
func writeDetails(b *bytes.Buffer, v *View, bullet string, code func(string) string) {
	if bullet == "" {
		bullet = "  "
	}
	var failing []string
	for _, c := range v.Clusters {
		for _, f := range c.FailingUnits {
			line := code(c.Name+"/"+f.Unit) + ": " + f.Reason
			if f.Message != "" {
				line += ": " + oneLine(f.Message, 300)
			}
			failing = append(failing, line)
		}
	}
	section(b, "Failing units", bullet, failing)
	var suspended []string
	for _, c := range v.Clusters {
		for _, u := range c.SuspendedUnits {
			suspended = append(suspended, code(c.Name+"/"+u)+": Suspended (not applied or pruned until unsuspended in the fleet repo)")
		}
	}
	section(b, "Suspended units", bullet, suspended)
	var running []string
	for _, c := range v.Clusters {
		if c.Progress != nil {
			running = append(running, code(c.Name)+": "+c.Progress.String())
		}
	}
	section(b, "Cycles in progress", bullet, running)
	var waiting []string
	for _, c := range v.Clusters {
		for _, u := range c.WaitingUnits {
			waiting = append(waiting, code(c.Name+"/"+u.Unit)+": "+oneLine(u.Message, 300))
		}
	}
	section(b, "Waiting units", bullet, waiting)
	var untrusted []string
	for _, c := range v.Clusters {
		if c.State == StateUntrusted {
			untrusted = append(untrusted, fmt.Sprintf("%s (%s %s): %s", code(c.Name), c.StatusRef, shortHash(c.StatusCommit), c.Reason))
		}
	}
	for _, s := range v.Strays {
		untrusted = append(untrusted, fmt.Sprintf("%s (%s): %s", code(s.Ref), shortHash(s.Commit), s.Reason))
	}
	section(b, "Untrusted status (not believed)", bullet, untrusted)
	var warnings []string
	warnings = append(warnings, v.Warnings...)
	for _, c := range v.Clusters {
		for _, w := range c.Warnings {
			warnings = append(warnings, code(c.Name)+": "+w)
		}
	}
	section(b, "Warnings", bullet, warnings)
}

func section(b *bytes.Buffer, title, bullet string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s:\n", title)
	for _, l := range lines {
		fmt.Fprintf(b, "%s%s\n", bullet, l)
	}
}

func fleetMarkdown(w io.Writer, v *View) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "### Fleet status at `%s`\n\n%s.\n\n", status.ShortRevision(v.Revision), summaryLine(v))
	b.WriteString("| Cluster | Fleets | State | Revision | Units | Jobs | Heartbeat | Reason |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, c := range v.Clusters {
		fmt.Fprintf(&b, "| %s | %s | %s %s | %s | %s | %s | %s | %s |\n",
			mdCell(c.Name), mdCell(fleetsCell(c.Fleets)), stateIcon(c.State), c.State, mdCell(revisionCell(c)),
			unitsCell(c), mdCell(jobsCell(c.Jobs)), ageCell(c), mdCell(oneLine(c.Reason, 120)))
	}
	writeDetails(&b, v, "- ", func(s string) string { return "`" + s + "`" })
	_, err := w.Write(b.Bytes())
	return err
}

func stateIcon(s State) string {
	switch s {
	case StateInSync:
		return "✅"
	case StateBehind:
		return "⏳"
	case StateFailing:
		return "❌"
	case StatePruneHeld:
		return "✋"
	case StateUnreachable:
		return "📡"
	case StateUntrusted:
		return "⚠️"
	}
	return "❔"
}

func rolloutIcon(s RolloutState) string {
	switch s {
	case RolloutCompleted:
		return "✅"
	case RolloutFailed:
		return "❌"
	case RolloutPropagating, RolloutDispatched, RolloutAccepted:
		return "⏳"
	}
	return "➖"
}

func rolloutSummary(r *RolloutView) string {
	parts := []string{plural.Count(len(r.Clusters), "cluster", "clusters")}
	for _, s := range AllRolloutStates {
		if n := r.Summary[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	return strings.Join(parts, ", ")
}

func rolloutHeader(r *RolloutView) string {
	where := "the head of " + r.Branch
	if r.Behind > 0 {
		where = fmt.Sprintf("%d commit(s) before the head of %s", r.Behind, r.Branch)
	}
	return fmt.Sprintf("Change %s %q by %s: %s (%s, %s)", shortHash(r.Commit), r.Subject, r.Author, r.State, where, status.ShortRevision(r.Revision))
}

func rolloutTable(w io.Writer, r *RolloutView) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n%s\n\n", rolloutHeader(r), rolloutSummary(r))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tFLEETS\tROLLOUT\tREASON")
	for _, c := range r.Clusters {
		reason := c.Reason
		if c.Note != "" {
			reason += " [" + c.Note + "]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, fleetsCell(c.Fleets), c.State, oneLine(reason, 120))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	rolloutDetails(&b, r, "  ", func(s string) string { return s })
	_, err := w.Write(b.Bytes())
	return err
}

func rolloutDetails(b *bytes.Buffer, r *RolloutView, bullet string, code func(string) string) {
	var failing []string
	for _, c := range r.Clusters {
		for _, f := range c.FailingUnits {
			line := code(c.Name+"/"+f.Unit) + ": " + f.Reason
			if f.Message != "" {
				line += ": " + oneLine(f.Message, 300)
			}
			failing = append(failing, line)
		}
	}
	section(b, "Failing units", bullet, failing)
	section(b, "Warnings", bullet, r.Warnings)
}

func rolloutMarkdown(w io.Writer, r *RolloutView) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "### Rollout of `%s`\n\n%s.\n\n%s.\n\n", shortHash(r.Commit), mdCell(rolloutHeader(r)), rolloutSummary(r))
	b.WriteString("| Cluster | Fleets | Rollout | Reason |\n|---|---|---|---|\n")
	for _, c := range r.Clusters {
		reason := c.Reason
		if c.Note != "" {
			reason += " [" + c.Note + "]"
		}
		fmt.Fprintf(&b, "| %s | %s | %s %s | %s |\n", mdCell(c.Name), mdCell(fleetsCell(c.Fleets)), rolloutIcon(c.State), c.State, mdCell(oneLine(reason, 160)))
	}
	rolloutDetails(&b, r, "- ", func(s string) string { return "`" + s + "`" })
	_, err := w.Write(b.Bytes())
	return err
}

// oneLine flattens s to one line of at most max runes.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
