package fleetview

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/plural"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// JobsView is the fleet's Volcano jobs as the agents report them:
// `flotilla status jobs`.
type JobsView struct {
	Repo     string `json:"repo,omitempty"`
	Branch   string `json:"branch,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Time is when the view was built; ages are relative to it.
	Time metav1.Time `json:"time"`
	// Summary counts jobs by phase.
	Summary map[string]int `json:"summary"`
	Jobs    []JobRow       `json:"jobs"`
	// NoStatus names the clusters without a trusted status document.
	NoStatus []string `json:"noStatus,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// JobRow is one job on one cluster.
type JobRow struct {
	Cluster string `json:"cluster"`
	status.JobStatus
	// Reported is the heartbeat of the status document it comes from.
	Reported *metav1.Time `json:"reported,omitempty"`
}

// NewJobsView lists the jobs of every cluster's document, sorted by
// cluster, namespace and name.
func NewJobsView(docs *Documents, now time.Time) *JobsView {
	v := &JobsView{Time: metav1.NewTime(now.UTC().Truncate(time.Second)), Summary: map[string]int{}, Jobs: []JobRow{}}
	if docs == nil {
		return v
	}
	v.Repo, v.Branch, v.Revision, v.Warnings = docs.Repo, docs.Branch, docs.Revision, docs.Warnings
	for _, cd := range docs.Clusters {
		if cd.Document == nil {
			v.NoStatus = append(v.NoStatus, cd.Cluster)
			continue
		}
		hb := cd.Document.Heartbeat
		for _, j := range cd.Document.Jobs {
			v.Jobs = append(v.Jobs, JobRow{Cluster: cd.Cluster, JobStatus: j, Reported: &hb})
			v.Summary[phaseOf(j)]++
		}
	}
	sort.SliceStable(v.Jobs, func(i, j int) bool {
		a, b := v.Jobs[i], v.Jobs[j]
		if a.Cluster != b.Cluster {
			return a.Cluster < b.Cluster
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return v
}

func phaseOf(j status.JobStatus) string {
	if j.Phase == "" {
		return "Unknown"
	}
	return j.Phase
}

// WriteJobs prints the view in one of Formats.
func WriteJobs(w io.Writer, v *JobsView, format string) error {
	switch format {
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case FormatYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case FormatTable:
		return jobsTable(w, v, false)
	case FormatMarkdown:
		return jobsTable(w, v, true)
	}
	return fmt.Errorf("unknown output format %q (want %s)", format, strings.Join(Formats, ", "))
}

var jobColumns = []string{"CLUSTER", "JOB", "PHASE", "PODGROUP", "RUNNING", "SUCCEEDED", "FAILED", "PREFLIGHT", "STARTED", "FINISHED", "MESSAGE"}

func jobsTable(w io.Writer, v *JobsView, markdown bool) error {
	rows := make([][]string, 0, len(v.Jobs))
	for _, j := range v.Jobs {
		rows = append(rows, []string{
			j.Cluster, j.Namespace + "/" + j.Name, phaseOf(j.JobStatus), dash(j.PodGroupPhase),
			fmt.Sprint(j.Running), fmt.Sprint(j.Succeeded), fmt.Sprint(j.Failed), dash(j.Preflight),
			ago(j.StartTime, v.Time.Time), ago(j.CompletionTime, v.Time.Time), dash(oneLine(j.Message, 120)),
		})
	}
	if markdown {
		fmt.Fprintf(w, "**%s**\n\n", summary(v))
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(jobColumns, " | "), strings.Repeat("---|", len(jobColumns)))
		for _, r := range rows {
			for i := range r {
				r[i] = strings.ReplaceAll(r[i], "|", `\|`)
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
	} else {
		fmt.Fprintln(w, summary(v))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(jobColumns, "\t"))
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(v.NoStatus) > 0 {
		fmt.Fprintf(w, "\nno status from: %s\n", strings.Join(v.NoStatus, ", "))
	}
	for _, warn := range v.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	return nil
}

func summary(v *JobsView) string {
	phases := make([]string, 0, len(v.Summary))
	for p := range v.Summary {
		phases = append(phases, p)
	}
	sort.Strings(phases)
	parts := []string{plural.Count(len(v.Jobs), "job", "jobs")}
	for _, p := range phases {
		parts = append(parts, fmt.Sprintf("%d %s", v.Summary[p], p))
	}
	return strings.Join(parts, ", ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ago prints a time as an age ("3m ago"), "-" when unset.
func ago(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	d := now.Sub(t.Time)
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
