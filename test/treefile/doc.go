// Package treefile holds the files of a directory tree as tests see them:
// a map from slash-separated paths to contents, written into a directory
// (a fleet repo's working tree) or read back from one (to commit what a
// command changed).
package treefile
