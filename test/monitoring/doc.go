// Package monitoring holds the tests of manifests/monitoring: the
// PrometheusRule's rules parse and validate with Prometheus' own rule
// parser, and every metric the rules and the Grafana dashboard query is one
// the agent exports, as gathered from agent/metrics' registry.
//
// It is a module of its own (go.mod beside this file, run by `make test`
// and tidied by `make lint`) so that github.com/prometheus/prometheus and
// its dependencies stay out of the flotilla module.
package monitoring
