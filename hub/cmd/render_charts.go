package cmd

import (
	"context"

	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// vendorCharts adapts pkg/render's chart vendoring to the compiler's hook
// (pkg/slice cannot import pkg/render, which imports it).
func vendorCharts(ctx context.Context, root string, refs []slice.ChartRef) ([]slice.VendoredChart, error) {
	in := make([]render.ChartRef, len(refs))
	for i, r := range refs {
		in[i] = render.ChartRef{Repo: r.Repo, Chart: r.Chart, Version: r.Version}
	}
	got, err := render.VendorCharts(ctx, root, in)
	if err != nil {
		return nil, err
	}
	out := make([]slice.VendoredChart, len(got))
	for i, v := range got {
		out[i] = slice.VendoredChart{
			Ref:     slice.ChartRef{Repo: v.Ref.Repo, Chart: v.Ref.Chart, Version: v.Ref.Version},
			Version: v.Version,
			Digest:  v.Digest,
			Path:    v.Path,
		}
	}
	return out, nil
}
