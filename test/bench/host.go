package bench

import (
	"os"
	"strings"
)

// LoadAverage is /proc/loadavg's first three fields: the benchmark shares
// the machine, and a busy machine explains slow figures.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
