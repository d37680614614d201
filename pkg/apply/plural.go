package apply

import "fmt"

// plural is "1 pod" or "2 pods": counts in messages must agree with their
// noun.
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
