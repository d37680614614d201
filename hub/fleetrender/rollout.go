package fleetrender

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// SnapshotDir holds content-addressed copies of the sources of the
// applications under a rollout: rendered/snapshots/<id>/<repo path>. Units
// of such applications read their sources there rather than in apps/, so a
// cluster whose wave is not released keeps working, byte for byte, after
// apps/ moved on. A snapshot is kept while a slice references it; Git
// stores its blobs once, shared with the sources it copies.
const SnapshotDir = "rendered/snapshots"

// ErrCannotHold: a cluster's committed unit cannot be kept for its wave,
// because it reads sources from apps/ that have changed since (it was
// rendered before the application had a rollout).
var ErrCannotHold = errors.New("cannot hold the previous content")

// RolloutOptions hold back changed applications under a rollout on the
// clusters whose wave is not released.
type RolloutOptions struct {
	// Committed is the committed rendered/ tree, which held units, their
	// snapshots and the rollout states are read from.
	Committed CommittedTree
	// States replace the committed states of the named applications
	// (`rollout advance`).
	States map[string]*rollout.State
	// AllWaves releases every wave at once (an emergency; plan says so).
	AllWaves bool
}

// CommittedTree is a fleet repo's committed rendered/ tree.
type CommittedTree interface {
	// Slice is the cluster's committed slice; an error when it has none.
	Slice(cluster string) (*slice.Slice, error)
	// Files are the regular files below dir (repo-relative), sorted by
	// path; none when dir does not exist.
	Files(dir string) ([]File, error)
	// State is the application's rollout state; nil when it has none.
	State(app string) (*rollout.State, error)
}

// CommittedAt is the committed tree under root.
func CommittedAt(root string) CommittedTree { return diskTree(root) }

type diskTree string

func (t diskTree) Slice(cluster string) (*slice.Slice, error) { return slice.Read(string(t), cluster) }

func (t diskTree) Files(dir string) ([]File, error) {
	files, err := readFiles(string(t), dir, "")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read committed %s: %w", dir, err)
	}
	return files, nil
}

func (t diskTree) State(app string) (*rollout.State, error) {
	data, err := os.ReadFile(filepath.Join(string(t), filepath.FromSlash(rollout.Path(app))))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read rollout state of %s: %w", app, err)
	}
	s, err := rollout.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rollout.Path(app), err)
	}
	return s, nil
}

// rolloutPlan is an application's rollout in this compile.
type rolloutPlan struct {
	state *rollout.State
	// wave maps each destination cluster to its wave's index.
	wave map[string]int
	// snapshot is this revision's snapshot directory and files.
	snapshot      string
	snapshotFiles []File
	// committed is set once a cluster is found to have the unit already;
	// without any, the application is new and every wave gets it.
	committed bool
	fresh     bool
	// previous are the units abort restores, by hash (State.Previous);
	// loaded from the committed tree or captured when the rollout starts.
	previous map[string]*keptUnit
	// replaced is the state of the rollout a fresh one replaces, whose
	// kept units stay kept (State.Earlier).
	replaced *rollout.State
	held     []string
}

// RolloutResult is one application's rollout in a compile.
type RolloutResult struct {
	Application string
	State       *rollout.State
	// Held are the clusters that kept their committed unit although the
	// revision changes it (their wave is not released), sorted.
	Held []string
}

// keptUnit is a unit kept for abort: its slice entry and files.
type keptUnit struct {
	unit  slice.Unit
	files []unitFile
}

// planRollouts relocates the sources of every application under a rollout
// into its snapshot and decides its state. It runs after digestApp.
func (c *compiler) planRollouts() error {
	for _, p := range c.apps {
		if p.broken {
			continue
		}
		waves := c.repo.Waves(p.app)
		if waves == nil {
			continue
		}
		rp := &rolloutPlan{wave: map[string]int{}}
		for i, w := range waves {
			for _, cl := range w.Clusters {
				rp.wave[cl] = i
			}
		}
		rev, err := appRevision(p)
		if err != nil {
			return err
		}
		if err := c.snapshot(p, rp); err != nil {
			return err
		}
		name := p.app.Metadata.Name
		var prev *rollout.State
		if ro := c.opts.Rollout; ro != nil {
			if s, ok := ro.States[name]; ok {
				prev = s
			} else if ro.Committed != nil {
				if prev, err = ro.Committed.State(name); err != nil {
					return err
				}
			}
		}
		st := &rollout.State{APIVersion: rollout.APIVersion, Kind: rollout.Kind, Application: name, Revision: rev, Waves: len(waves)}
		switch {
		case c.opts.Rollout != nil && c.opts.Rollout.AllWaves:
			st.Released = len(waves)
			st.Reason = "render --all-waves: every wave released at once"
		case prev != nil && prev.Revision == rev:
			cp := *prev
			st = &cp
			st.Waves = len(waves)
			st.Previous = maps.Clone(prev.Previous)
			st.Earlier = maps.Clone(prev.Earlier)
			st.Restore = maps.Clone(prev.Restore)
		default:
			st.Released = 1
			st.Paused = prev != nil && prev.Paused
			rp.fresh = true
			rp.replaced = prev
			st.Reason = fmt.Sprintf("new revision: wave %s released; later waves keep their content", waves[0].Name)
			if prev != nil && prev.Released < prev.Waves {
				st.Reason += fmt.Sprintf(" (replaces revision %s, which had reached %d of %d waves)", shortRevision(prev.Revision), prev.Released, prev.Waves)
			}
		}
		if st.Previous == nil {
			st.Previous = map[string]string{}
		}
		rp.previous = map[string]*keptUnit{}
		rp.state = st
		if rp.replaced != nil && rp.replaced.Revision == st.Revision {
			rp.replaced = nil // --all-waves over the same revision
		}
		p.rollout = rp
	}
	return nil
}

// appRevision identifies what an application's rollout rolls out: its
// sources and its spec, but not the rollout spec itself.
func appRevision(p *appPlan) (string, error) {
	spec := p.app.Spec
	spec.Rollout = nil
	data, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("application %s: %w", p.app.Metadata.Name, err)
	}
	d := sha256.New()
	fmt.Fprintf(d, "%d:%s\n", len(p.digest), p.digest)
	d.Write(data)
	return "sha256:" + hex.EncodeToString(d.Sum(nil)), nil
}

func shortRevision(rev string) string {
	rev = strings.TrimPrefix(rev, "sha256:")
	return rev[:min(12, len(rev))]
}

// snapshot copies the application's inputs into its snapshot directory,
// named by their digest, and points the plan's sources, inputs and digest
// there.
func (c *compiler) snapshot(p *appPlan, rp *rolloutPlan) error {
	rp.snapshot = path.Join(SnapshotDir, p.digest[:20])
	at := func(rel string) string { return path.Join(rp.snapshot, rel) }
	for _, in := range p.inputs {
		files, err := readFiles(c.repo.Root, in.Path, in.Except)
		if err != nil {
			return fmt.Errorf("application %s: snapshot: %w", p.app.Metadata.Name, err)
		}
		for _, f := range files {
			rp.snapshotFiles = append(rp.snapshotFiles, File{Path: at(f.Path), Data: f.Data})
		}
	}
	digest, err := c.hasher.InputsDigestAt(p.inputs, at)
	if err != nil {
		return fmt.Errorf("application %s: %w", p.app.Metadata.Name, err)
	}
	moved := make([]slice.Input, len(p.inputs))
	for i, in := range p.inputs {
		moved[i] = slice.Input{Path: at(in.Path), Except: in.Except}
	}
	p.inputs, p.digest = moved, digest
	for i, r := range p.resources {
		if rel, ok := strings.CutPrefix(r, relFromUnitDir("")); ok {
			p.resources[i] = relFromUnitDir(at(rel))
		}
	}
	if p.chartDir != "" {
		p.chartDir = at(p.chartDir)
	}
	if p.srcDir != "" {
		p.srcDir = at(p.srcDir)
	}
	return nil
}

// readFiles reads the files below dir (repo-relative) but its top-level
// entry skip, sorted by path. A symlink or an executable file is refused:
// snapshots and kept units are written back as plain files, which would
// not hash the same.
func readFiles(root, dir, skip string) ([]File, error) {
	var out []File
	base := filepath.Join(root, filepath.FromSlash(dir))
	err := filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if skip != "" && rel == path.Join(dir, skip) {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() || info.Mode()&0o111 != 0 {
			return fmt.Errorf("%s: only regular, non-executable files can be kept for a rollout", rel)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, File{Path: rel, Data: data})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// committedSlice reads a cluster's committed slice once per cluster;
// draftCluster runs clusters one after another, so one entry suffices.
func (c *compiler) committedSlice(cluster string) *slice.Slice {
	if c.lastCommitted.cluster == cluster {
		return c.lastCommitted.slice
	}
	var s *slice.Slice
	if ro := c.opts.Rollout; ro != nil && ro.Committed != nil {
		s, _ = ro.Committed.Slice(cluster) // none: nothing to hold
	}
	c.lastCommitted.cluster, c.lastCommitted.slice = cluster, s
	return s
}

// holdUnit returns the unit a cluster runs for an application under a
// rollout: the new one when the cluster's wave is released or it has none
// yet, else its committed unit, unchanged. ok is false after an error.
func (c *compiler) holdUnit(p *appPlan, cl *fleet.Cluster, u slice.Unit, content *unitContent) (slice.Unit, *unitContent, bool) {
	rp := p.rollout
	if rp == nil {
		return u, content, true
	}
	name := cl.Metadata.Name
	committed := c.committedSlice(name)
	var cu *slice.Unit
	if committed != nil {
		for i := range committed.Units {
			if committed.Units[i].Name == u.Name {
				cu = &committed.Units[i]
			}
		}
	}
	if rp.state.Aborted {
		if h := rp.state.AbortTarget(name); h != "" {
			k, err := c.keptUnit(p, h)
			if err != nil {
				c.errs.add(p.app.Source.File, p.app.Line("spec"), "", ErrCannotHold, name, err.Error())
				return u, content, false
			}
			ru := k.unit
			ru.Path = u.Path
			ru.Suspend = u.Suspend
			if ru.Helm != nil {
				helm := *ru.Helm
				helm.Values = path.Join(u.Path, slice.ValuesFile)
				ru.Helm = &helm
			}
			return ru, &unitContent{namespace: ru.Namespace, hash: ru.Hash, files: k.files}, true
		}
	}
	if cu == nil {
		return u, content, true
	}
	rp.committed = true
	if cu.Hash == u.Hash {
		return u, content, true
	}
	w, inWave := rp.wave[name]
	released := !inWave || w < rp.state.Released
	if released && !(rp.fresh && inSnapshots(cu.Inputs)) {
		return u, content, true
	}
	files, err := c.opts.Rollout.Committed.Files(cu.Path)
	if err != nil {
		c.errs.add(p.app.Source.File, p.app.Line("spec"), "", ErrCannotHold, name, err.Error())
		return u, content, false
	}
	held := &unitContent{namespace: cu.Namespace, hash: cu.Hash}
	hashed := make([]slice.File, 0, len(files))
	for _, f := range files {
		n := strings.TrimPrefix(f.Path, cu.Path+"/")
		held.files = append(held.files, unitFile{name: n, data: f.Data})
		hashed = append(hashed, slice.File{Name: n, Data: f.Data})
	}
	if !inSnapshots(cu.Inputs) {
		// Rendered before the rollout: it reads apps/ directly, which
		// holds only if those sources did not change.
		digest, err := c.hasher.InputsDigest(cu.Inputs)
		if err != nil || slice.UnitHash(hashed, digest) != cu.Hash {
			c.errs.add(p.app.Source.File, p.app.Line("spec"), "spec", ErrCannotHold, name,
				"the committed unit reads sources in apps/ that this change edits (it was rendered before the application had a rollout); render the rollout declaration on its own first, or use --all-waves")
			return u, content, false
		}
		if sameOutsideSnapshot(held.files, content.files, rp.snapshot) {
			// The same content, only not yet read from a snapshot:
			// moving it there changes no object.
			return u, content, true
		}
	}
	hu := *cu
	hu.DependsOn = nil // recomputed from the current spec
	// Suspending is break-glass: it reaches held waves at once.
	hu.Suspend = u.Suspend
	if rp.fresh && inSnapshots(cu.Inputs) {
		// The rollout starts: what the cluster has now is what abort
		// gives back.
		rp.state.Previous[name] = cu.Hash
		if _, ok := rp.previous[cu.Hash]; !ok {
			rp.previous[cu.Hash] = &keptUnit{unit: hu, files: held.files}
		}
		if older := carried(rp.replaced, name, cu.Hash); len(older) > 0 {
			if rp.state.Earlier == nil {
				rp.state.Earlier = map[string][]string{}
			}
			rp.state.Earlier[name] = older
		}
	}
	if released {
		return u, content, true
	}
	rp.held = append(rp.held, name)
	return hu, held, true
}

// carried are the units a replaced rollout kept for cluster, newest first,
// but cur: what the cluster had before the content it has now, which the
// new rollout keeps too, since that content may be a revision that failed
// there.
func carried(replaced *rollout.State, cluster, cur string) []string {
	if replaced == nil {
		return nil
	}
	h, ok := replaced.Previous[cluster]
	if !ok {
		return nil
	}
	var out []string
	for _, k := range append([]string{h}, replaced.Earlier[cluster]...) {
		if k != cur && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// keptUnit loads a unit kept for abort from the committed tree.
func (c *compiler) keptUnit(p *appPlan, hash string) (*keptUnit, error) {
	rp := p.rollout
	if k, ok := rp.previous[hash]; ok {
		return k, nil
	}
	dir := rollout.PreviousDir(p.app.Metadata.Name, hash)
	files, err := c.opts.Rollout.Committed.Files(dir)
	if err != nil {
		return nil, err
	}
	k := &keptUnit{}
	found := false
	for _, f := range files {
		n := strings.TrimPrefix(f.Path, dir+"/")
		if n == rollout.PreviousUnitFile {
			if err := yaml.UnmarshalStrict(f.Data, &k.unit); err != nil {
				return nil, fmt.Errorf("%s: %w", f.Path, err)
			}
			found = true
			continue
		}
		k.files = append(k.files, unitFile{name: strings.TrimPrefix(n, "files/"), data: f.Data})
	}
	if !found || k.unit.Hash != hash {
		return nil, fmt.Errorf("%s does not hold unit %s", dir, hash)
	}
	rp.previous[hash] = k
	return k, nil
}

// sameOutsideSnapshot reports whether a unit rendered before its
// application had a rollout has the files of the new unit but for the
// snapshot directory in the source paths.
func sameOutsideSnapshot(old, cur []unitFile, snapshot string) bool {
	if len(old) != len(cur) {
		return false
	}
	byName := make(map[string][]byte, len(old))
	for _, f := range old {
		byName[f.name] = f.data
	}
	prefix := []byte(relFromUnitDir(snapshot + "/"))
	plain := []byte(relFromUnitDir(""))
	for _, f := range cur {
		o, ok := byName[f.name]
		if !ok || !bytes.Equal(o, bytes.ReplaceAll(f.data, prefix, plain)) {
			return false
		}
	}
	return true
}

// reference marks the snapshots inputs read.
func reference(referenced map[string]bool, inputs []slice.Input) {
	for _, in := range inputs {
		if rest, ok := strings.CutPrefix(in.Path, SnapshotDir+"/"); ok {
			id, _, _ := strings.Cut(rest, "/")
			referenced[path.Join(SnapshotDir, id)] = true
		}
	}
}

// previousFiles are the kept units of p's state, whose snapshots count as
// referenced.
func (c *compiler) previousFiles(p *appPlan, referenced map[string]bool) ([]File, error) {
	var out []File
	for _, h := range p.rollout.state.Kept() {
		k, err := c.keptUnit(p, h)
		if err != nil {
			return nil, fmt.Errorf("application %s: %w", p.app.Metadata.Name, err)
		}
		reference(referenced, k.unit.Inputs)
		dir := rollout.PreviousDir(p.app.Metadata.Name, h)
		u := k.unit
		u.DependsOn = nil
		entry, err := yaml.Marshal(u)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: dir + "/" + rollout.PreviousUnitFile, Data: entry})
		for _, f := range k.files {
			out = append(out, File{Path: dir + "/files/" + f.name, Data: f.data})
		}
	}
	return out, nil
}

func inSnapshots(inputs []slice.Input) bool {
	for _, in := range inputs {
		if !strings.HasPrefix(in.Path, SnapshotDir+"/") {
			return false
		}
	}
	return true
}

// rolloutFiles are the snapshots the compiled slices reference and the
// rollout states, for Output.Shared.
func (c *compiler) rolloutFiles(clusters []*ClusterOutput) ([]File, error) {
	current := map[string][]File{}
	referenced := map[string]bool{}
	var out []File
	for _, p := range c.apps {
		rp := p.rollout
		if rp == nil {
			continue
		}
		current[rp.snapshot] = rp.snapshotFiles
		if rp.fresh && !rp.committed && len(c.opts.Clusters) == 0 {
			rp.state.Released = rp.state.Waves
			rp.state.Reason = "first deployment: every wave at once"
		}
		if rp.state.Complete() && !rp.state.Aborted {
			// Every wave has the revision: there is nothing left to
			// abort (a revert in Git rolls it back), and the kept units
			// and their snapshots can go.
			rp.state.Previous, rp.state.Earlier, rp.state.Restore = nil, nil, nil
		}
		data, err := rollout.Marshal(rp.state)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: rollout.Path(p.app.Metadata.Name), Data: data})
		c.rollouts = append(c.rollouts, RolloutResult{Application: p.app.Metadata.Name, State: rp.state, Held: rp.held})
		kept, err := c.previousFiles(p, referenced)
		if err != nil {
			return nil, err
		}
		out = append(out, kept...)
	}
	for _, co := range clusters {
		for _, u := range co.Slice.Units {
			reference(referenced, u.Inputs)
		}
	}
	for _, dir := range sortedKeys(referenced) {
		files, ok := current[dir]
		if !ok {
			var err error
			if c.opts.Rollout == nil || c.opts.Rollout.Committed == nil {
				return nil, fmt.Errorf("snapshot %s is referenced but no committed tree was given", dir)
			}
			if files, err = c.opts.Rollout.Committed.Files(dir); err != nil {
				return nil, err
			}
			if len(files) == 0 {
				return nil, fmt.Errorf("snapshot %s is referenced by a held unit but missing from rendered/", dir)
			}
		}
		out = append(out, files...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
