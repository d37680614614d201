package plan

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"html"
	"strings"

	"github.com/flotilla-gitops/flotilla/pkg/plural"
)

// MarkdownMarker starts every Markdown plan, so a CI step can find and
// update its earlier comment (a "sticky" comment).
const MarkdownMarker = "<!-- flotilla-plan -->"

// footerReserve is the room kept for the truncation note.
const footerReserve = 512

// Markdown renders the plan for a pull-request comment: a summary table
// first, then a folded section per cluster with ```diff blocks. When the
// whole would exceed maxBytes (DefaultMaxBytes when ≤ 0), clusters that do
// not fit are shown without their diffs, then not at all, and a note says
// so; the result never exceeds maxBytes.
func Markdown(p *Plan, maxBytes int) string {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	var b strings.Builder
	b.WriteString(MarkdownMarker + "\n")
	fmt.Fprintf(&b, "### Flotilla plan: %s → %s\n\n", mdRevision(p.Base), mdRevision(p.Head))
	if p.Empty() {
		b.WriteString("**No changes**: every cluster gets the same objects.\n")
	} else {
		fmt.Fprintf(&b, "**%s change**: %s\n", plural.Count(p.Summary.Clusters, "cluster", "clusters"), countsLine(p.Summary))
	}
	if p.Failed {
		b.WriteString("\n> [!CAUTION]\n> Some units failed to render at head; the agent will fail on them too.\n")
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "\n> [!WARNING]\n> %s\n", mdText(w))
	}
	if len(p.Notes) > 0 {
		b.WriteString("\n**Moves between clusters**\n\n")
		for _, n := range p.Notes {
			fmt.Fprintf(&b, "- %s\n", mdText(n))
		}
	}
	if len(p.Ownership) > 0 {
		b.WriteString("\n**Ownership**\n\n")
		for _, n := range p.Ownership {
			fmt.Fprintf(&b, "- %s\n", mdText(n))
		}
	}

	// The table may hold every cluster of a large fleet: it gets at most
	// half the budget.
	shownRows := 0
	if len(p.Clusters) > 0 {
		b.WriteString("\n| cluster | units +/−/~ | objects +/−/~ |\n|---|---|---|\n")
		for i := range p.Clusters {
			cp := &p.Clusters[i]
			row := fmt.Sprintf("| %s%s | %d / %d / %d | %d / %d / %d |\n", cp.Name, clusterTag(cp),
				cp.Counts.UnitsAdded, cp.Counts.UnitsRemoved, cp.Counts.UnitsChanged,
				cp.Counts.ObjectsAdded, cp.Counts.ObjectsRemoved, cp.Counts.ObjectsChanged)
			if b.Len()+len(row) > maxBytes/2 {
				break
			}
			b.WriteString(row)
			shownRows++
		}
		if shownRows < len(p.Clusters) {
			fmt.Fprintf(&b, "| … and %s | | |\n", plural.Count(len(p.Clusters)-shownRows, "more cluster", "more clusters"))
		}
	}

	// Clusters whose changes are identical (a fleet-wide change) share one
	// section.
	groups := groupClusters(p.Clusters)
	full, compact := 0, 0
	for _, g := range groups {
		budget := maxBytes - footerReserve - b.Len()
		if compact == 0 {
			if s := clusterSection(g, true); len(s) <= budget {
				b.WriteString(s)
				full += len(g)
				continue
			}
		}
		if s := clusterSection(g, false); len(s) <= budget {
			b.WriteString(s)
			compact += len(g)
			continue
		}
		break
	}
	if omitted := len(p.Clusters) - full - compact; compact > 0 || omitted > 0 || shownRows < len(p.Clusters) {
		fmt.Fprintf(&b, "\n---\n:warning: **Plan truncated** to %d bytes (a comment holds 65,536 characters): ", maxBytes)
		var parts []string
		if compact > 0 {
			parts = append(parts, fmt.Sprintf("%s shown without diffs", plural.Count(compact, "cluster", "clusters")))
		}
		if omitted > 0 {
			parts = append(parts, fmt.Sprintf("%s not shown", plural.Count(omitted, "cluster", "clusters")))
		}
		if shownRows < len(p.Clusters) {
			parts = append(parts, plural.Count(len(p.Clusters)-shownRows, "table row", "table rows")+" left out")
		}
		b.WriteString(strings.Join(parts, ", "))
		b.WriteString(". Run `flotilla plan` locally, or read the CI job's log, for the whole plan.\n")
	}
	out := b.String()
	if len(out) > maxBytes { // only when maxBytes is tiny
		out = truncateUTF8(out, maxBytes)
	}
	return out
}

func truncateUTF8(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

func clusterTag(cp *ClusterPlan) string {
	switch cp.Change {
	case Added:
		return " (new)"
	case Removed:
		return " (removed)"
	}
	return ""
}

func mdRevision(r Revision) string {
	if r.Commit == "" {
		return mdText(r.Ref)
	}
	return fmt.Sprintf("%s (`%s`)", mdCode(r.Ref), short(r.Commit))
}

// mdText escapes text for Markdown prose: no HTML, one line.
func mdText(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return html.EscapeString(s)
}

// mdCode wraps s in a code span that its own backticks cannot close.
func mdCode(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// codeBlock fences content so that no line of it can close the block.
func codeBlock(lang, content string) string {
	fence := strings.Repeat("`", max(3, longestRun(content, '`')+1))
	if !strings.HasSuffix(content, "\n") {
		content += "\n"
	}
	return fence + lang + "\n" + content + fence + "\n"
}

// groupClusters puts clusters with identical changes together, in order
// of their first member.
func groupClusters(cs []ClusterPlan) [][]*ClusterPlan {
	var groups [][]*ClusterPlan
	index := map[string]int{}
	for i := range cs {
		cp := &cs[i]
		key, err := json.Marshal(struct {
			Change Change
			Caps   string
			Units  []shownUnit
		}{cp.Change, capsLine(cp.Capabilities), shownUnits(cp.Units)})
		if err != nil {
			groups = append(groups, []*ClusterPlan{cp})
			continue
		}
		sum := sha256.Sum256(key)
		k := string(sum[:])
		if gi, ok := index[k]; ok {
			groups[gi] = append(groups[gi], cp)
			continue
		}
		index[k] = len(groups)
		groups = append(groups, []*ClusterPlan{cp})
	}
	return groups
}

// shownUnit is what a section shows of a unit: clusters whose units differ
// only in hashes or in unchanged lines far from the changes have the same
// changes.
type shownUnit struct {
	Name, Kind, Change, Error, BaseError string
	Suspended, InputsOnly                bool
	Settings, Reencrypted                []string
	Objects                              []string
	Hooks                                []string
}

func shownUnits(us []UnitPlan) []shownUnit {
	out := make([]shownUnit, len(us))
	for i, u := range us {
		su := shownUnit{Name: u.Name, Kind: u.Kind, Change: string(u.Change), Error: u.Error, BaseError: u.BaseError, Suspended: u.Suspended, Settings: u.Settings, InputsOnly: u.InputsOnly, Reencrypted: u.Reencrypted}
		for _, o := range u.Objects {
			su.Objects = append(su.Objects, string(o.Change)+" "+o.APIVersion+" "+o.ID()+"\n"+o.Diff)
		}
		for _, o := range u.Hooks {
			su.Hooks = append(su.Hooks, string(o.Change)+" "+o.APIVersion+" "+o.ID()+" "+o.Hook+"\n"+o.Diff)
		}
		out[i] = su
	}
	return out
}

// groupTitle names a group's clusters: all of them up to a few, else the
// first ones and how many more.
func groupTitle(g []*ClusterPlan) string {
	const named = 5
	var names []string
	for i, cp := range g {
		if i == named {
			break
		}
		names = append(names, "<b>"+cp.Name+"</b>")
	}
	title := strings.Join(names, ", ")
	if len(g) > named {
		title += fmt.Sprintf(" and %d more", len(g)-named)
	}
	if len(g) > 1 {
		title += fmt.Sprintf(" (%d clusters, the same changes)", len(g))
	}
	return title + clusterTag(g[0])
}

// clusterSection is one folded group of clusters with identical changes;
// without diffs it lists the units and objects only.
func clusterSection(g []*ClusterPlan, diffs bool) string {
	cp := g[0]
	var b strings.Builder
	countsOf := countsLine(cp.Counts)
	if len(g) > 1 {
		countsOf += " each"
	}
	fmt.Fprintf(&b, "\n<details><summary>%s: %s</summary>\n\n", groupTitle(g), countsOf)
	if len(g) > 5 {
		const listed = 50
		var all []string
		for i, c := range g {
			if i == listed {
				all = append(all, fmt.Sprintf("and %d more", len(g)-listed))
				break
			}
			all = append(all, c.Name)
		}
		fmt.Fprintf(&b, "Clusters: %s.\n\n", strings.Join(all, ", "))
	}
	fmt.Fprintf(&b, "Rendered with %s.\n", capsLine(cp.Capabilities))
	for i := range cp.Units {
		u := &cp.Units[i]
		fmt.Fprintf(&b, "\n**%s unit `%s`** (%s)\n", changeMark(u.Change), u.Name, u.Kind)
		for _, s := range u.Settings {
			fmt.Fprintf(&b, "- %s\n", mdText(s))
		}
		if u.Suspended {
			fmt.Fprintf(&b, "- **Suspended:** %s\n", mdText(suspendedText))
		}
		if u.InputsOnly {
			fmt.Fprintf(&b, "- %s\n", mdText(inputsOnlyText(u, false)))
		}
		if u.Error != "" {
			b.WriteString("\n:x: render failed at head:\n\n" + codeBlock("text", u.Error))
		}
		if u.BaseError != "" {
			b.WriteString("\nrender failed at base:\n\n" + codeBlock("text", u.BaseError))
		}
		writeObjectsMarkdown(&b, u.Objects, diffs, false)
		if len(u.Hooks) > 0 {
			b.WriteString("\n" + hooksTitle + "\n")
			writeObjectsMarkdown(&b, u.Hooks, diffs, true)
		}
	}
	b.WriteString("\n</details>\n")
	return b.String()
}

// writeObjectsMarkdown lists objects (or hooks, with when they run), with
// their diffs when diffs.
func writeObjectsMarkdown(b *strings.Builder, objs []ObjectPlan, diffs, hooks bool) {
	if len(objs) == 0 {
		return
	}
	when := func(o *ObjectPlan) string {
		if !hooks {
			return ""
		}
		return " (" + o.Hook + ")"
	}
	if !diffs {
		b.WriteString("\n")
		for j := range objs {
			o := &objs[j]
			fmt.Fprintf(b, "- `%s` %s %s%s\n", changeMark(o.Change), o.APIVersion, o.ID(), mdText(when(o)))
		}
		return
	}
	var d strings.Builder
	for j := range objs {
		o := &objs[j]
		fmt.Fprintf(&d, "# %s %s %s%s\n", changeMark(o.Change), o.APIVersion, o.ID(), when(o))
		d.WriteString(o.Diff)
	}
	b.WriteString("\n" + codeBlock("diff", d.String()))
}

// MarkdownProblems is the comment of a plan that could not be computed
// because the fleet repo does not load at head: the problems, each
// naming file, line and field, so the pull request says what to fix.
func MarkdownProblems(problems []string, maxBytes int) string {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	var b strings.Builder
	b.WriteString(MarkdownMarker + "\n")
	fmt.Fprintf(&b, "### Flotilla plan: the fleet repo does not load\n\n**%s** at head; nothing can be planned until they are fixed:\n\n```\n",
		plural.Count(len(problems), "problem", "problems"))
	for _, p := range problems {
		line := strings.ReplaceAll(p, "```", "'''") + "\n"
		if b.Len()+len(line)+footerReserve > maxBytes {
			b.WriteString("…\n")
			break
		}
		b.WriteString(line)
	}
	b.WriteString("```\n")
	return b.String()
}
