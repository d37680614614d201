package testenv

import (
	"context"
	"testing"
	"time"
)

// BenchmarkClusterStart measures New until ready (Stop is excluded):
//
//	go test ./test/testenv -run '^$' -bench ClusterStart -benchtime 3x
func BenchmarkClusterStart(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts ClusterOptions
	}{
		{"minimal", ClusterOptions{Mode: Minimal}},
		{"full", ClusterOptions{Mode: Full}},
		{"full-volcano", ClusterOptions{Mode: Full, Volcano: true, Nodes: GPUNodes("gpu", 2, 2)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
				c, err := New(ctx, "bench-"+bc.name, "", bc.opts)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				total += c.StartDuration()
				b.StopTimer()
				b.Logf("%s start %s (%s)", bc.name, c.StartDuration().Round(time.Millisecond), c.timingSummary())
				if err := c.Stop(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/start")
		})
	}
}
