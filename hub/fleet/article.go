package fleet

import "strings"

// withArticle is "a Cluster" or "an Application": kinds and node kinds
// appear in messages after an indefinite article.
func withArticle(noun string) string {
	if noun != "" && strings.ContainsRune("AEIOUaeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}
