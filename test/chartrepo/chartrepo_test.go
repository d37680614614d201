package chartrepo

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const fixtures = "../fixtures/charts"

func TestPackageIsReproducible(t *testing.T) {
	a, err := PackageDirs(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	b, err := PackageDirs(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 2 || a[0].Name != "mysql-db" || a[1].Name != "redis-cache" {
		t.Fatalf("packaged %+v", a)
	}
	for i := range a {
		if !bytes.Equal(a[i].Archive, b[i].Archive) || a[i].Digest != b[i].Digest {
			t.Errorf("%s: two packagings differ", a[i].Name)
		}
	}
	// Entries sit under <chart>/, as helm package writes them.
	zr, err := gzip.NewReader(bytes.NewReader(a[0].Archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if !sort.StringsAreSorted(names) || names[0] != "mysql-db/Chart.yaml" {
		t.Errorf("archive entries %v", names)
	}
	// Another version of the same source.
	v, err := Package(fixtures+"/mysql-db", "0.1.7")
	if err != nil || v.Version != "0.1.7" || v.FileName() != "mysql-db-0.1.7.tgz" {
		t.Fatalf("Package with version: %+v, %v", v, err)
	}
}

func get(t *testing.T, c *http.Client, u string) []byte {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestServeAndProxy(t *testing.T) {
	charts, err := PackageDirs(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(charts, "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := &http.Client{Timeout: 10 * time.Second}
	var idx struct {
		Entries map[string][]struct {
			Version string   `yaml:"version"`
			Digest  string   `yaml:"digest"`
			URLs    []string `yaml:"urls"`
		} `yaml:"entries"`
	}
	if err := yaml.Unmarshal(get(t, c, srv.URL+"/index.yaml"), &idx); err != nil {
		t.Fatal(err)
	}
	e := idx.Entries["redis-cache"]
	if len(e) != 1 || e[0].Version != "0.2.0" || e[0].Digest != charts[1].Digest || e[0].URLs[0] != "redis-cache-0.2.0.tgz" {
		t.Fatalf("index entry %+v", e)
	}
	if got := get(t, c, srv.URL+"/redis-cache-0.2.0.tgz"); !bytes.Equal(got, charts[1].Archive) {
		t.Errorf("archive differs")
	}
	if srv.Requests()["/charts/index.yaml"] != 1 {
		t.Errorf("requests %v", srv.Requests())
	}

	// Through the proxy, as https://charts.example.com/any/path.
	p, err := ServeProxy(charts, "charts.example.com")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.CAPEM) {
		t.Fatal("bad CA")
	}
	proxyURL, _ := url.Parse(p.URL)
	pc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
	if got := get(t, pc, "https://charts.example.com/flotilla/index.yaml"); !strings.Contains(string(got), "mysql-db") {
		t.Errorf("index through the proxy: %s", got)
	}
	if got := get(t, pc, "https://charts.example.com/flotilla/mysql-db-0.1.0.tgz"); !bytes.Equal(got, charts[0].Archive) {
		t.Errorf("archive through the proxy differs")
	}
	if p.Requests()["/flotilla/index.yaml"] != 1 {
		t.Errorf("proxy requests %v", p.Requests())
	}
}
