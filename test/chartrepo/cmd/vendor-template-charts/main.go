// Command vendor-template-charts refreshes the vendored charts of
// fleet-repo-template/ (or another fleet repo) from the chart sources in
// test/fixtures/charts/: it packages them, serves them through a loopback
// HTTPS proxy as https://charts.example.com/flotilla (the placeholder URL
// the template's app.yaml files name), and runs the real `flotilla render`
// against it, so the charts, their lock file and rendered/ are exactly what
// render produces from a chart repository.
//
//	make build
//	go run ./test/chartrepo/cmd/vendor-template-charts -refresh
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/flotilla-gitops/flotilla/test/chartrepo"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	repo := flag.String("repo", "fleet-repo-template", "fleet repo to render")
	charts := flag.String("charts", "test/fixtures/charts", "directory of chart sources")
	host := flag.String("host", "charts.example.com", "host the app.yaml repo URLs name")
	bin := flag.String("flotilla", "", "flotilla binary (default: bin/flotilla of this checkout)")
	refresh := flag.Bool("refresh", false, "remove the repo's charts/ first, so every chart is downloaded again")
	flag.Parse()

	if *bin == "" {
		dir, err := testenv.BinDir()
		if err != nil {
			return err
		}
		*bin = filepath.Join(dir, "flotilla")
	}
	packaged, err := chartrepo.PackageDirs(*charts)
	if err != nil {
		return err
	}
	proxy, err := chartrepo.ServeProxy(packaged, *host)
	if err != nil {
		return err
	}
	defer proxy.Close()
	tmp, err := os.MkdirTemp("", "flotilla-ca-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	caFile := filepath.Join(tmp, "ca.pem")
	if err := os.WriteFile(caFile, proxy.CAPEM, 0o600); err != nil {
		return err
	}
	if *refresh {
		if err := os.RemoveAll(filepath.Join(*repo, "charts")); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, *bin, "render", "--repo", *repo)
	cmd.Env = append(os.Environ(),
		"HTTPS_PROXY="+proxy.URL, "https_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=",
		"SSL_CERT_FILE="+caFile)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("flotilla render: %w", err)
	}
	fmt.Printf("chart repository requests: %v\n", proxy.Requests())
	return nil
}
