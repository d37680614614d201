package fleet

import (
	"net/url"
	"path"
	"regexp"
	"strings"
)

// gitCommit is a full SHA-1 commit hash, the only form a pin may take.
var gitCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// scpLike is git's user@host:path remote form.
var scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^/]`)

// gitSource checks spec.source.git: a remote URL without credentials (they
// would be committed), exactly one ref and a path inside the repository.
func gitSource(d *document, g *GitSource) {
	const field = "spec.source.git"
	switch u, err := url.Parse(g.URL); {
	case g.URL == "":
		d.errorf(field+".url", ErrRequired, "the repository's URL (https://, http://, ssh:// or user@host:path)")
	case scpLike.MatchString(g.URL):
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh"):
		d.errorf(field+".url", ErrInvalidValue, "not an https://, http://, ssh:// or user@host:path Git URL")
	case u.User != nil && u.Scheme != "ssh":
		// Never echo it: the URL may hold a secret.
		d.errorf(field+".url", ErrInvalidValue, "must not embed credentials; give them to flotilla render with --source-credentials-dir")
	case u.User != nil:
		if _, has := u.User.Password(); has {
			d.errorf(field+".url", ErrInvalidValue, "must not embed a password; give credentials to flotilla render with --source-credentials-dir")
		}
	}
	r := g.Ref
	set := 0
	for _, v := range []string{r.Branch, r.Tag, r.Commit} {
		if v != "" {
			set++
		}
	}
	switch {
	case set == 0:
		d.errorf(field+".ref", ErrRequired, "one of branch, tag or commit")
	case set > 1:
		d.errorf(field+".ref", ErrInvalidValue, "set only one of branch, tag or commit")
	case r.Commit != "" && !gitCommit.MatchString(r.Commit):
		d.errorf(field+".ref.commit", ErrInvalidValue, "%q is not a full 40-character lowercase commit hash", r.Commit)
	case r.Branch != "" && !gitRefName(r.Branch):
		d.errorf(field+".ref.branch", ErrInvalidValue, "%q is not a valid branch name", r.Branch)
	case r.Tag != "" && !gitRefName(r.Tag):
		d.errorf(field+".ref.tag", ErrInvalidValue, "%q is not a valid tag name", r.Tag)
	}
	if g.Path != "" {
		vendoredPath(d, field+".path", g.Path)
	}
}

// gitRefName is git check-ref-format's rules for a short branch or tag name.
func gitRefName(s string) bool {
	if s == "" || s == "@" || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") ||
		strings.HasSuffix(s, ".") || strings.HasSuffix(s, ".lock") || strings.Contains(s, "..") ||
		strings.Contains(s, "//") || strings.Contains(s, "@{") || strings.Contains(s, "/.") || strings.HasPrefix(s, ".") {
		return false
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) {
			return false
		}
	}
	return true
}

// vendoredPath checks a path inside a Git source or its vendored copy:
// slash-separated, relative and staying inside. Empty is the root.
func vendoredPath(d *document, field, p string) {
	if p == "" {
		return
	}
	if strings.HasPrefix(p, "/") || strings.Contains(p, `\`) {
		d.errorf(field, ErrInvalidValue, "%q must be a slash-separated path relative to the Git source's root", p)
		return
	}
	if c := path.Clean(p); c == ".." || strings.HasPrefix(c, "../") {
		d.errorf(field, ErrInvalidValue, "%q leaves the Git source", p)
	}
}
