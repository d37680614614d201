package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
)

// Alias expansion budget. A document without aliases is bounded by the file
// size limit alone; aliases may multiply it, so their expansion is capped:
// up to bombFloor nodes anything goes, above that the expanded tree may be at
// most bombRatio times the parsed one and never more than bombCeiling nodes.
// Legitimate anchors (shared labels, values blocks) stay far below; a
// "billion laughs" document (9 levels of 10 aliases) needs 10^9.
const (
	bombFloor   = 100_000
	bombRatio   = 10
	bombCeiling = 1_000_000
)

// ScanYAML rejects data whose aliases would expand beyond the budget. It is
// called on every file the renderer reads, on Helm's output and on the chart
// repository indexes the hub vendors from, before anything decodes them. Data that is not YAML, or fails to parse, is
// left to its consumer to report.
func ScanYAML(data []byte) error {
	if !mayHaveAliases(data) {
		return nil
	}
	parsed, expanded, err := yamlExpansion(data)
	if err != nil {
		return err
	}
	if expanded <= bombFloor || expanded <= parsed {
		return nil
	}
	if expanded > bombCeiling || expanded > bombRatio*parsed {
		return classed(ErrYAMLBomb, fmt.Sprintf("aliases expand %d nodes to %s", parsed, describeCount(expanded)))
	}
	return nil
}

// mayHaveAliases is a cheap, conservative test: an anchor (&x) and an alias
// (*x) can only start where a YAML token starts, i.e. after whitespace or a
// flow/indicator character. Text without both cannot expand.
func mayHaveAliases(data []byte) bool {
	return hasTokenStart(data, '&') && hasTokenStart(data, '*')
}

func hasTokenStart(data []byte, c byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(data[i:], c)
		if j < 0 {
			return false
		}
		i += j
		if i+1 < len(data) && !isYAMLSpace(data[i+1]) && (i == 0 || isTokenBoundary(data[i-1])) {
			return true
		}
		i++
		if i >= len(data) {
			return false
		}
	}
}

func isYAMLSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func isTokenBoundary(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', '[', '{', ',', ':', '-', '?', '"', '\'', '!', '>', '|', 0xBF: // 0xBF ends a UTF-8 BOM
		return true
	}
	return false
}

// errAliasCycle: an anchor whose value contains an alias to itself.
var errAliasCycle = errors.New("alias refers to its own anchor")

// yamlExpansion counts the nodes of every document of data as parsed and as
// they would be after alias expansion (saturating at satCap).
func yamlExpansion(data []byte) (parsed, expanded int64, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if derr := dec.Decode(&doc); derr != nil {
			if errors.Is(derr, io.EOF) {
				return parsed, expanded, nil
			}
			// Not YAML (or broken YAML): its consumer reports that; nothing
			// after a syntax error gets decoded, so nothing can expand.
			return parsed, expanded, nil
		}
		c := expansionCounter{memo: map[*yaml.Node]int64{}, active: map[*yaml.Node]bool{}}
		parsed += countParsed(&doc)
		n, cerr := c.count(&doc)
		if cerr != nil {
			return parsed, expanded, classed(ErrYAMLBomb, cerr.Error())
		}
		expanded = satAdd(expanded, n)
	}
}

func countParsed(n *yaml.Node) int64 {
	var total int64 = 1
	for _, ch := range n.Content {
		total += countParsed(ch)
	}
	return total
}

type expansionCounter struct {
	memo   map[*yaml.Node]int64
	active map[*yaml.Node]bool
}

func (c *expansionCounter) count(n *yaml.Node) (int64, error) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return 1, nil
		}
		return c.count(n.Alias)
	}
	// Only anchored nodes can be reached twice (or from themselves), so only
	// they are memoized and checked for cycles.
	anchored := n.Anchor != ""
	if anchored {
		if v, ok := c.memo[n]; ok {
			return v, nil
		}
		if c.active[n] {
			return 0, errAliasCycle
		}
		c.active[n] = true
	}
	var total int64 = 1
	for _, ch := range n.Content {
		v, err := c.count(ch)
		if err != nil {
			return 0, err
		}
		total = satAdd(total, v)
	}
	if anchored {
		delete(c.active, n)
		c.memo[n] = total
	}
	return total, nil
}

// satCap keeps counts far from overflow; anything that large is a bomb.
const satCap = int64(1) << 60

func satAdd(a, b int64) int64 {
	if a >= satCap || b >= satCap || a+b >= satCap {
		return satCap
	}
	return a + b
}

func describeCount(n int64) string {
	if n >= satCap {
		return "more than 10^18"
	}
	return fmt.Sprint(n)
}
