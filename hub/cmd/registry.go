package cmd

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor"
)

// maxPasswordStdin bounds what --registry-password-stdin reads.
const maxPasswordStdin = 64 << 10

// registryFlags say how render and plan reach the OCI registries of
// oci:// charts. Credentials stay in memory.
type registryFlags struct {
	config        string
	caFile        string
	username      string
	passwordStdin bool
}

func (r *registryFlags) add(f *pflag.FlagSet) {
	f.StringVar(&r.config, "registry-config", "", "registry credentials for oci:// charts, in Docker's config.json format as `helm registry login` writes it (default: $"+chartvendor.RegistryEnv+", else Helm's, with Docker's config.json as the fallback)")
	f.StringVar(&r.caFile, "registry-ca-file", "", "PEM file of CA certificates to trust for oci:// registries, besides the system's")
	f.StringVar(&r.username, "registry-username", "", "user name for oci:// registries (with --registry-password-stdin; instead of the registry config)")
	f.BoolVar(&r.passwordStdin, "registry-password-stdin", false, "read the password for --registry-username from standard input")
}

// vendor is the chart vendor the flags describe.
func (r *registryFlags) vendor(stdin io.Reader) (fleetrender.ChartVendor, error) {
	o := chartvendor.RegistryOptions{ConfigFile: r.config, CAFile: r.caFile, Username: r.username}
	switch {
	case r.username != "" && !r.passwordStdin:
		return nil, errors.New("--registry-username needs --registry-password-stdin")
	case r.passwordStdin && r.username == "":
		return nil, errors.New("--registry-password-stdin needs --registry-username")
	case r.passwordStdin:
		b, err := io.ReadAll(io.LimitReader(stdin, maxPasswordStdin+1))
		if err != nil {
			return nil, fmt.Errorf("--registry-password-stdin: %w", err)
		}
		if len(b) > maxPasswordStdin {
			return nil, fmt.Errorf("--registry-password-stdin: more than %d bytes", maxPasswordStdin)
		}
		o.Password = strings.TrimRight(string(b), "\r\n")
		if o.Password == "" {
			return nil, errors.New("--registry-password-stdin: standard input is empty")
		}
	}
	return o.VendorCharts, nil
}
