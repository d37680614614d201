package chartrepo

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// epoch is the timestamp of every archive entry and index entry, so
// packaging is reproducible.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Chart is a packaged chart.
type Chart struct {
	Name       string
	Version    string
	AppVersion string
	APIVersion string
	// Archive is the .tgz; Digest its sha256 in hex, as index.yaml records it.
	Archive []byte
	Digest  string
}

// FileName is the archive's name in the repository: <name>-<version>.tgz.
func (c *Chart) FileName() string { return c.Name + "-" + c.Version + ".tgz" }

type chartMeta struct {
	APIVersion string `yaml:"apiVersion"`
	Name       string `yaml:"name"`
	Version    string `yaml:"version"`
	AppVersion string `yaml:"appVersion"`
}

// Package archives the chart directory dir (which holds Chart.yaml)
// reproducibly: entries sorted, fixed timestamps and modes. version, when
// not empty, replaces the Chart.yaml version (to serve several versions of
// one source).
func Package(dir, version string) (*Chart, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", dir, err)
	}
	var meta chartMeta
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("package %s: Chart.yaml: %w", dir, err)
	}
	if meta.Name == "" || meta.Version == "" {
		return nil, fmt.Errorf("package %s: Chart.yaml needs name and version", dir)
	}
	if version != "" && version != meta.Version {
		meta.Version = version
		var node yaml.Node
		if err := yaml.Unmarshal(raw, &node); err != nil {
			return nil, fmt.Errorf("package %s: %w", dir, err)
		}
		setVersion(&node, version)
		if raw, err = yaml.Marshal(&node); err != nil {
			return nil, fmt.Errorf("package %s: %w", dir, err)
		}
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", dir, err)
	}
	sort.Strings(files)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.ModTime = epoch
	tw := tar.NewWriter(gz)
	for _, f := range files {
		data := raw
		if f != "Chart.yaml" {
			if data, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(f))); err != nil {
				return nil, fmt.Errorf("package %s: %w", dir, err)
			}
		}
		hdr := &tar.Header{
			Name: path.Join(meta.Name, f), Mode: 0o644, Size: int64(len(data)),
			ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("package %s: %w", dir, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("package %s: %w", dir, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("package %s: %w", dir, err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("package %s: %w", dir, err)
	}
	sum := sha256.Sum256(buf.Bytes())
	apiVersion := meta.APIVersion
	if apiVersion == "" {
		apiVersion = "v2"
	}
	return &Chart{
		Name: meta.Name, Version: meta.Version, AppVersion: meta.AppVersion, APIVersion: apiVersion,
		Archive: buf.Bytes(), Digest: hex.EncodeToString(sum[:]),
	}, nil
}

func setVersion(n *yaml.Node, version string) {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "version" {
			n.Content[i+1].Value = version
			n.Content[i+1].Tag = "!!str"
		}
	}
}

// Index returns the repository's index.yaml. Archive URLs are relative to
// the repository URL, as `helm repo index` writes them, unless baseURL is
// set.
func Index(charts []*Chart, baseURL string) ([]byte, error) {
	type entry struct {
		APIVersion string   `yaml:"apiVersion"`
		AppVersion string   `yaml:"appVersion,omitempty"`
		Created    string   `yaml:"created"`
		Digest     string   `yaml:"digest"`
		Name       string   `yaml:"name"`
		URLs       []string `yaml:"urls"`
		Version    string   `yaml:"version"`
	}
	idx := struct {
		APIVersion string             `yaml:"apiVersion"`
		Entries    map[string][]entry `yaml:"entries"`
		Generated  string             `yaml:"generated"`
	}{APIVersion: "v1", Entries: map[string][]entry{}, Generated: epoch.Format(time.RFC3339)}
	for _, c := range charts {
		u := c.FileName()
		if baseURL != "" {
			u = strings.TrimSuffix(baseURL, "/") + "/" + u
		}
		idx.Entries[c.Name] = append(idx.Entries[c.Name], entry{
			APIVersion: c.APIVersion, AppVersion: c.AppVersion, Created: epoch.Format(time.RFC3339),
			Digest: c.Digest, Name: c.Name, URLs: []string{u}, Version: c.Version,
		})
	}
	return yaml.Marshal(idx)
}

// PackageDirs packages every chart directory under dir (each subdirectory
// holding a Chart.yaml), sorted by name.
func PackageDirs(dir string) ([]*Chart, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("package charts in %s: %w", dir, err)
	}
	var out []*Chart
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "Chart.yaml")); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		c, err := Package(filepath.Join(dir, e.Name()), "")
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// Server is a chart repository on loopback HTTP. Requests for any host are
// answered by path, so it also works as the HTTP proxy of a client whose
// repository URL names another (example) host.
type Server struct {
	// URL is the repository URL, e.g. http://127.0.0.1:41234/charts.
	URL string

	srv      *http.Server
	ln       net.Listener
	mu       sync.Mutex
	files    map[string][]byte
	requests map[string]int
	// anyPrefix serves files by base name under any path (the proxy serves
	// whatever path the repository URL names).
	anyPrefix bool
}

// Prefix is the path under which Serve publishes the repository.
const Prefix = "/charts"

// Serve starts a repository serving the charts under /charts on addr
// (127.0.0.1:0 when empty). Close stops it.
func Serve(charts []*Chart, addr string) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s, err := newServer(charts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve charts: %w", err)
	}
	s.ln = ln
	s.URL = "http://" + ln.Addr().String() + Prefix
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // returns ErrServerClosed on Close
	return s, nil
}

func newServer(charts []*Chart) (*Server, error) {
	index, err := Index(charts, "")
	if err != nil {
		return nil, err
	}
	s := &Server{files: map[string][]byte{"index.yaml": index}, requests: map[string]int{}}
	for _, c := range charts {
		s.files[c.FileName()] = c.Archive
	}
	return s, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, Prefix+"/")
	if s.anyPrefix {
		name, ok = path.Base(r.URL.Path), true
	}
	s.mu.Lock()
	s.requests[r.URL.Path]++
	data, found := s.files[name]
	s.mu.Unlock()
	if !ok || !found || r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.NotFound(w, r)
		return
	}
	if strings.HasSuffix(name, ".tgz") {
		w.Header().Set("Content-Type", "application/gzip")
	} else {
		w.Header().Set("Content-Type", "application/x-yaml")
	}
	w.Write(data) //nolint:errcheck // the client sees a short body
}

// Requests returns how many requests each path received.
func (s *Server) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.requests))
	for k, v := range s.requests {
		out[k] = v
	}
	return out
}

// TotalRequests is the number of requests served so far.
func (s *Server) TotalRequests() int {
	n := 0
	for _, v := range s.Requests() {
		n += v
	}
	return n
}

// Close stops the server.
func (s *Server) Close() error {
	return s.srv.Close()
}
