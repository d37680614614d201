package status

import "github.com/flotilla-gitops/flotilla/pkg/redact"

// MaxMessageLength bounds every message in a committed document (bytes);
// longer ones are cut at a UTF-8 boundary and marked.
const MaxMessageLength = redact.MaxLength

// RedactDocument applies redact.Text to every free-text field of doc (condition
// messages, unit and loop errors, verification and job messages) and bounds
// their length, in place. The Writer calls it before every commit.
func RedactDocument(doc *ClusterStatus) {
	if doc == nil {
		return
	}
	clean := redact.Scrubber{}.String
	for i := range doc.Conditions {
		doc.Conditions[i].Message = clean(doc.Conditions[i].Message)
	}
	doc.LastError = clean(doc.LastError)
	if doc.Verification != nil {
		doc.Verification.Message = clean(doc.Verification.Message)
	}
	for i := range doc.Units {
		u := &doc.Units[i]
		u.LastError = clean(u.LastError)
		for j := range u.Conditions {
			u.Conditions[j].Message = clean(u.Conditions[j].Message)
		}
	}
	for i := range doc.Jobs {
		doc.Jobs[i].Message = clean(doc.Jobs[i].Message)
	}
}
