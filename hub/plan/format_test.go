package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// bigPlan has n clusters, each with one changed object whose diff is
// about diffLines lines, some holding backticks that must not close a
// code block.
func bigPlan(n, diffLines int) *Plan {
	p := &Plan{APIVersion: APIVersion, Kind: Kind, Base: Revision{Ref: "main", Commit: strings.Repeat("a", 40)}, Head: Revision{Ref: WorkingTree}}
	for i := 0; i < n; i++ {
		var d strings.Builder
		d.WriteString("@@ -1,2 +1,2 @@\n")
		for j := 0; j < diffLines; j++ {
			fmt.Fprintf(&d, "+  line %d of cluster %d ```not a fence```\n", j, i)
		}
		cp := ClusterPlan{
			Name: fmt.Sprintf("cluster-%04d", i), Change: Changed, Capabilities: Capabilities{Source: FromDefault},
			Counts: Counts{Clusters: 1, UnitsChanged: 1, ObjectsChanged: 1},
			Units: []UnitPlan{{Name: "web", Kind: "kustomize", Change: Changed, Objects: []ObjectPlan{{
				APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", Change: Changed, Diff: d.String(),
			}}}},
		}
		p.Clusters = append(p.Clusters, cp)
		p.Summary.add(cp.Counts)
	}
	return p
}

func TestMarkdownFitsAndSaysWhatWasCut(t *testing.T) {
	tests := []struct {
		name                   string
		clusters, lines, limit int
		truncated              bool
	}{
		{"small plan in full", 2, 5, DefaultMaxBytes, false},
		{"long diffs shown compact", 40, 200, 20000, true},
		{"a thousand clusters", 1000, 3, DefaultMaxBytes, true},
		{"tiny limit", 3, 3, 300, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := Markdown(bigPlan(tt.clusters, tt.lines), tt.limit)
			if len(md) > tt.limit {
				t.Fatalf("%d bytes, limit %d", len(md), tt.limit)
			}
			if !strings.HasPrefix(md, MarkdownMarker) {
				t.Error("the sticky-comment marker is not first")
			}
			if got := strings.Contains(md, "Plan truncated"); got != tt.truncated {
				t.Errorf("truncation note present %v, want %v", got, tt.truncated)
			}
			if tt.limit < 1000 {
				return // cut mid-way by design
			}
			if o, c := strings.Count(md, "<details>"), strings.Count(md, "</details>"); o != c {
				t.Errorf("%d <details> but %d </details>", o, c)
			}
			if !strings.Contains(md, "| cluster | units +/−/~ | objects +/−/~ |") {
				t.Error("no summary table")
			}
			// Every diff block is fenced by a run of backticks longer than
			// any inside it.
			if strings.Contains(md, "\n```diff\n") {
				t.Error("a 3-backtick fence around content holding ``` runs")
			}
			if tt.clusters == 1000 && !strings.Contains(md, "more clusters") {
				t.Error("the table does not say how many rows were left out")
			}
		})
	}
}

func TestTextColourOnlyWhenAsked(t *testing.T) {
	p := bigPlan(1, 2)
	var plain, colour bytes.Buffer
	if err := WriteText(&plain, p, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteText(&colour, p, true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "\x1b[") {
		t.Error("escape codes without colour")
	}
	if !strings.Contains(colour.String(), ansiGreen+"+  line 0 ") {
		t.Error("added lines are not green")
	}
}

func TestJSONListsAreNeverNull(t *testing.T) {
	p := &Plan{APIVersion: APIVersion, Kind: Kind, Notes: []string{}, Warnings: []string{}, Clusters: []ClusterPlan{}}
	var b bytes.Buffer
	if err := WriteJSON(&b, p); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"notes", "warnings", "clusters"} {
		if _, ok := m[k].([]any); !ok {
			t.Errorf("%s is %v, want a list", k, m[k])
		}
	}
}

func TestMarkdownGroupsIdenticalClusters(t *testing.T) {
	p := bigPlan(1, 3)
	for i := 1; i < 8; i++ {
		c := p.Clusters[0]
		c.Name = fmt.Sprintf("same-%d", i)
		p.Clusters = append(p.Clusters, c)
	}
	p.Clusters = append(p.Clusters, bigPlan(2, 3).Clusters[1])
	md := Markdown(p, DefaultMaxBytes)
	if n := strings.Count(md, "<details>"); n != 2 {
		t.Errorf("%d sections, want 2 (8 identical clusters, 1 other)", n)
	}
	if !strings.Contains(md, "<b>cluster-0000</b>, <b>same-1</b>, <b>same-2</b>, <b>same-3</b>, <b>same-4</b> and 3 more (8 clusters, the same changes)") {
		t.Errorf("group title missing:\n%s", md)
	}
	if !strings.Contains(md, "Clusters: cluster-0000, same-1, same-2, same-3, same-4, same-5, same-6, same-7.") {
		t.Error("the group does not list its clusters")
	}
	if strings.Count(md, "| same-") != 7 {
		t.Error("the table does not list every cluster")
	}
}
