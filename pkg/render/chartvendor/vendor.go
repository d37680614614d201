package chartvendor

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	yamlv3 "gopkg.in/yaml.v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// Vendoring layout and limits.
const (
	// ChartsDir holds vendored charts: charts/<chart>/<version>/.
	ChartsDir = "charts"
	// ChartLockFile records what each chart reference resolved to.
	ChartLockFile = "charts/charts.lock.yaml"
	// ChartLockKind is the kind of ChartLockFile.
	ChartLockKind = "ChartLock"

	httpTimeout     = 60 * time.Second
	maxIndexSize    = 64 << 20
	maxChartArchive = 32 << 20
)

// ChartRef is a chart from a chart repository, as an Application names it.
type ChartRef struct {
	// Repo is the repository URL: http or https (index.yaml lives below
	// it), or oci://host/path (the chart is the OCI repository
	// host/path/<chart>, its versions are tags).
	Repo  string `json:"repo"`
	Chart string `json:"chart"`
	// Version is an exact version or a semver range (Masterminds syntax, as
	// Helm's). Prereleases match only a range that names a prerelease.
	// Empty means the latest stable version.
	Version string `json:"version"`
}

// VendoredChart is where a ChartRef was vendored.
type VendoredChart struct {
	Ref ChartRef
	// Version is the resolved chart version.
	Version string
	// Digest is "sha256:<hex>" of the chart archive.
	Digest string
	// ManifestDigest is the OCI manifest digest of an oci:// chart (what
	// `helm pull oci://…@<digest>` pins); empty for chart repositories.
	ManifestDigest string
	// Path is the repo-relative chart directory, charts/<chart>/<version>.
	Path string
}

// chartLock is ChartLockFile.
// It is written with yaml.v3, which keeps the field order below.
type chartLock struct {
	APIVersion string      `json:"apiVersion" yaml:"apiVersion"`
	Kind       string      `json:"kind" yaml:"kind"`
	Charts     []lockEntry `json:"charts" yaml:"charts"`
}

type lockEntry struct {
	Repo     string `json:"repo" yaml:"repo"`
	Chart    string `json:"chart" yaml:"chart"`
	Version  string `json:"version" yaml:"version"`
	Resolved string `json:"resolved" yaml:"resolved"`
	Digest   string `json:"digest" yaml:"digest"`
	// ManifestDigest: VendoredChart.ManifestDigest.
	ManifestDigest string `json:"manifestDigest,omitempty" yaml:"manifestDigest,omitempty"`
	Path           string `json:"path" yaml:"path"`
}

type lockKey struct{ repo, chart, version string }

var chartNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// VendorCharts makes every ref available under charts/ of the repository
// at repoRoot and returns, per ref and in the same order, where it is.
//
// A ref whose lock entry (same repo, chart and version range) still
// satisfies the range and whose directory holds that chart is reused
// without any network access. Otherwise the repository's index.yaml is
// fetched, the highest matching version chosen, its archive downloaded,
// checked against the index digest when there is one, and unpacked (with
// Helm's archive safety checks) to charts/<chart>/<version>/.
//
// Charts from oci:// repositories are resolved through Helm's registry
// client instead (see RegistryOptions): the registry's tags are listed,
// the highest matching version pulled, and its manifest digest recorded
// beside the archive digest.
//
// refs must be the complete set the repository uses (call it with none
// when the last chart reference goes): the lock file is rewritten to
// exactly these refs (sorted, with the generated-file header, only when its
// content changes; removed when there are none) and the directories of
// entries that disappeared are removed.
func VendorCharts(ctx context.Context, repoRoot string, refs []ChartRef) ([]VendoredChart, error) {
	return RegistryOptions{}.VendorCharts(ctx, repoRoot, refs)
}

// VendorCharts is the package's VendorCharts reaching OCI registries as o
// says.
func (o RegistryOptions) VendorCharts(ctx context.Context, repoRoot string, refs []ChartRef) ([]VendoredChart, error) {
	root, err := os.OpenRoot(repoRoot)
	if err != nil {
		return nil, fmt.Errorf("repository root: %w", err)
	}
	defer root.Close()
	old, err := readLock(root)
	if err != nil {
		return nil, err
	}
	oldByKey := map[lockKey]lockEntry{}
	for _, e := range old.Charts {
		oldByKey[lockKey{e.Repo, e.Chart, e.Version}] = e
	}
	v := &vendorer{ctx: ctx, root: root, client: &http.Client{Timeout: httpTimeout}, indexes: map[string]*repo.IndexFile{}, registry: o}

	out := make([]VendoredChart, len(refs))
	current := map[lockKey]lockEntry{}
	for i, ref := range refs {
		ref.Repo = strings.TrimSuffix(strings.TrimSpace(ref.Repo), "/")
		ref.Version = strings.TrimSpace(ref.Version)
		k := lockKey{ref.Repo, ref.Chart, ref.Version}
		e, ok := current[k]
		if !ok {
			e, err = v.vendor(ref, oldByKey)
			if err != nil {
				return nil, &RefError{Ref: refs[i], Field: fieldOf(err), Err: &render.Error{File: path.Join(ChartsDir, ref.Chart), Err: err}}
			}
			current[k] = e
		}
		out[i] = VendoredChart{Ref: refs[i], Version: e.Resolved, Digest: e.Digest, ManifestDigest: e.ManifestDigest, Path: e.Path}
	}

	lock := chartLock{APIVersion: slice.APIVersion, Kind: ChartLockKind, Charts: []lockEntry{}}
	byPath := map[string]lockEntry{}
	for _, e := range current {
		if prev, ok := byPath[e.Path]; ok && prev.Digest != e.Digest {
			return nil, &render.Error{File: e.Path, Err: render.Classify(render.ErrChartDigest,
				fmt.Sprintf("%s from %s and from %s differ; vendor them under different names", e.Path, prev.Repo, e.Repo))}
		}
		byPath[e.Path] = e
		lock.Charts = append(lock.Charts, e)
	}
	slices.SortFunc(lock.Charts, func(a, b lockEntry) int {
		return strings.Compare(a.Repo+"\x00"+a.Chart+"\x00"+a.Version, b.Repo+"\x00"+b.Chart+"\x00"+b.Version)
	})
	if err := writeLock(root, lock); err != nil {
		return nil, err
	}
	for _, e := range old.Charts {
		if _, used := byPath[e.Path]; !used && strings.HasPrefix(e.Path, ChartsDir+"/") {
			if err := root.RemoveAll(e.Path); err != nil {
				return nil, fmt.Errorf("remove stale chart %s: %w", e.Path, err)
			}
			_ = root.Remove(path.Dir(e.Path)) // only succeeds when empty
		}
	}
	return out, nil
}

type vendorer struct {
	ctx     context.Context
	root    *os.Root
	client  *http.Client
	indexes map[string]*repo.IndexFile
	// registry says how oci:// charts are reached; oci is its client,
	// made on first use.
	registry RegistryOptions
	oci      *registry.Client
}

func (v *vendorer) vendor(ref ChartRef, old map[lockKey]lockEntry) (lockEntry, error) {
	u, err := url.Parse(ref.Repo)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != ociScheme) || u.Host == "" {
		return lockEntry{}, render.Classify(render.ErrChartRepo, fmt.Sprintf("repository %q is not an http(s) or oci URL", ref.Repo))
	}
	if !chartNameRe.MatchString(ref.Chart) {
		return lockEntry{}, render.Classify(render.ErrChartNotFound, fmt.Sprintf("invalid chart name %q", ref.Chart))
	}
	rangeStr := ref.Version
	if rangeStr == "" {
		rangeStr = "*"
	}
	constraint, err := semver.NewConstraint(rangeStr)
	if err != nil {
		return lockEntry{}, render.Classify(render.ErrChartNotFound, fmt.Sprintf("invalid version range %q: %v", ref.Version, err))
	}

	if e, ok := old[lockKey{ref.Repo, ref.Chart, ref.Version}]; ok {
		if ver, err := semver.NewVersion(e.Resolved); err == nil && constraint.Check(ver) && v.vendoredDirOK(e) {
			return e, nil // offline: the pin still holds
		}
	}

	if u.Scheme == ociScheme {
		return v.vendorOCI(ref, u, constraint)
	}
	idx, err := v.index(ref.Repo)
	if err != nil {
		return lockEntry{}, err
	}
	cv, err := pickVersion(idx, ref.Chart, constraint)
	if err != nil {
		return lockEntry{}, err
	}
	if len(cv.URLs) == 0 {
		return lockEntry{}, render.Classify(render.ErrChartRepo, fmt.Sprintf("%s %s has no download URL", ref.Chart, cv.Version))
	}
	archiveURL, err := repo.ResolveReferenceURL(ref.Repo, cv.URLs[0])
	if err != nil {
		return lockEntry{}, render.Classify(render.ErrChartRepo, err.Error())
	}
	data, err := v.get(archiveURL, maxChartArchive)
	if err != nil {
		return lockEntry{}, err
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	if want := strings.ToLower(strings.TrimPrefix(cv.Digest, "sha256:")); want != "" && want != digest {
		return lockEntry{}, render.Classify(render.ErrChartDigest, fmt.Sprintf("%s %s: index says sha256:%s, archive is sha256:%s", ref.Chart, cv.Version, want, digest))
	}
	e := lockEntry{
		Repo:     ref.Repo,
		Chart:    ref.Chart,
		Version:  ref.Version,
		Resolved: cv.Version,
		Digest:   "sha256:" + digest,
		Path:     path.Join(ChartsDir, ref.Chart, cv.Version),
	}
	if err := v.unpack(e, data); err != nil {
		return lockEntry{}, err
	}
	return e, nil
}

// vendoredDirOK checks that a lock entry's directory holds that chart.
func (v *vendorer) vendoredDirOK(e lockEntry) bool {
	if e.Path != path.Join(ChartsDir, e.Chart, e.Resolved) {
		return false
	}
	data, err := v.root.ReadFile(path.Join(e.Path, "Chart.yaml"))
	if err != nil {
		return false
	}
	var md chart.Metadata
	if err := yaml.Unmarshal(data, &md); err != nil {
		return false
	}
	return md.Name == e.Chart && md.Version == e.Resolved
}

func (v *vendorer) index(repoURL string) (*repo.IndexFile, error) {
	if idx, ok := v.indexes[repoURL]; ok {
		return idx, nil
	}
	data, err := v.get(repoURL+"/index.yaml", maxIndexSize)
	if err != nil {
		return nil, err
	}
	if err := render.ScanYAML(data); err != nil {
		return nil, fmt.Errorf("%s/index.yaml: %w", repoURL, err)
	}
	idx := &repo.IndexFile{}
	if json.Valid(data) {
		err = json.Unmarshal(data, idx)
	} else {
		err = yaml.Unmarshal(data, idx)
	}
	if err != nil {
		return nil, render.Classify(render.ErrChartRepo, fmt.Sprintf("%s/index.yaml: %v", repoURL, err))
	}
	v.indexes[repoURL] = idx
	return idx, nil
}

// pickVersion returns the highest version of name satisfying c.
func pickVersion(idx *repo.IndexFile, name string, c *semver.Constraints) (*repo.ChartVersion, error) {
	var best *repo.ChartVersion
	var bestV *semver.Version
	for _, cv := range idx.Entries[name] {
		if cv == nil || cv.Metadata == nil {
			continue
		}
		ver, err := semver.NewVersion(cv.Version)
		if err != nil || !c.Check(ver) {
			continue
		}
		if bestV == nil || ver.GreaterThan(bestV) {
			best, bestV = cv, ver
		}
	}
	if best == nil {
		return nil, render.Classify(render.ErrChartNotFound, fmt.Sprintf("no version of %s matches %q", name, c.String()))
	}
	return best, nil
}

// get downloads url (bounded in time and size).
func (v *vendorer) get(u string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(v.ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, render.Classify(render.ErrChartRepo, err.Error())
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, render.ClassifyCause(render.ErrChartRepo, err.Error(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, render.Classify(render.ErrChartRepo, fmt.Sprintf("GET %s: %s", u, resp.Status))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, render.Classify(render.ErrChartRepo, fmt.Sprintf("GET %s: %v", u, err))
	}
	if int64(len(data)) > limit {
		return nil, render.Classify(render.ErrTooLarge, fmt.Sprintf("GET %s: more than %d bytes", u, limit))
	}
	return data, nil
}

// unpack writes the archive's files to e.Path, through a temporary
// directory renamed into place, so a failure never leaves half a chart.
func (v *vendorer) unpack(e lockEntry, archive []byte) error {
	files, err := loader.LoadArchiveFiles(bytes.NewReader(archive))
	if err != nil {
		return render.Classify(render.ErrChartRepo, fmt.Sprintf("%s: %v", e.Chart, err))
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return render.Classify(render.ErrChartRepo, fmt.Sprintf("%s: %v", e.Chart, err))
	}
	if ch.Name() != e.Chart || ch.Metadata.Version != e.Resolved {
		return render.Classify(render.ErrChartRepo, fmt.Sprintf("archive holds %s %s, the repository promised %s %s", ch.Name(), ch.Metadata.Version, e.Chart, e.Resolved))
	}
	if err := v.root.MkdirAll(path.Dir(e.Path), 0o755); err != nil {
		return err
	}
	tmp := path.Join(ChartsDir, ".tmp-"+e.Chart+"-"+rand.Text()[:10])
	defer v.root.RemoveAll(tmp)
	for _, f := range files {
		name := path.Clean(f.Name)
		if name == "." || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return render.Classify(render.ErrPathEscape, fmt.Sprintf("%s: archive entry %q", e.Chart, f.Name))
		}
		target := path.Join(tmp, name)
		if err := v.root.MkdirAll(path.Dir(target), 0o755); err != nil {
			return err
		}
		if err := v.root.WriteFile(target, f.Data, 0o644); err != nil {
			return err
		}
	}
	if err := v.root.RemoveAll(e.Path); err != nil {
		return err
	}
	return v.root.Rename(tmp, e.Path)
}

func readLock(root *os.Root) (chartLock, error) {
	var lock chartLock
	data, err := root.ReadFile(ChartLockFile)
	if errors.Is(err, fs.ErrNotExist) {
		return lock, nil
	}
	if err != nil {
		return lock, err
	}
	if err := yaml.UnmarshalStrict(data, &lock); err != nil {
		return lock, &render.Error{File: ChartLockFile, Err: render.Classify(render.ErrChartRepo, err.Error())}
	}
	return lock, nil
}

// writeLock writes lock, or removes the lock file when nothing is vendored.
func writeLock(root *os.Root, lock chartLock) error {
	if len(lock.Charts) == 0 {
		if err := root.Remove(ChartLockFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	var buf bytes.Buffer
	buf.WriteString(slice.GeneratedHeader + "\n")
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(lock); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	data := buf.Bytes()
	if old, err := root.ReadFile(ChartLockFile); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := root.MkdirAll(ChartsDir, 0o755); err != nil {
		return err
	}
	tmp := ChartLockFile + ".tmp"
	if err := root.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return root.Rename(tmp, ChartLockFile)
}
