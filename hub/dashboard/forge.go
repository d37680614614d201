package dashboard

import (
	"net/url"
	"regexp"
	"strings"
)

// CommitLinker turns a commit hash into the URL of its page; nil links
// nothing.
type CommitLinker func(hash string) string

var nameSegment = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// CommitTemplate is the placeholder a --commit-url template holds.
const CommitTemplate = "{sha}"

// LinkerFor returns the linker for a fleet repo: the template when given
// (its {sha} replaced), else a known forge's commit page derived from the
// remote URL (https, ssh:// or scp-like git@host:path), else nil (a local
// directory, an unknown host).
func LinkerFor(repo, template string) CommitLinker {
	if template != "" {
		return func(hash string) string { return strings.ReplaceAll(template, CommitTemplate, url.PathEscape(hash)) }
	}
	host, path, ok := remotePath(repo)
	if !ok {
		return nil
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	segments := strings.Split(path, "/")
	if len(segments) < 2 {
		return nil
	}
	for _, s := range segments {
		// Owner, group and project names on both forges; anything else
		// is not a project path we know how to link.
		if !nameSegment.MatchString(s) || strings.Trim(s, ".") == "" {
			return nil
		}
	}
	var sep string
	switch host {
	case "github.com":
		if strings.Count(path, "/") != 1 {
			return nil
		}
		sep = "/commit/"
	case "gitlab.com":
		// GitLab's canonical commit page; groups may nest.
		sep = "/-/commit/"
	default:
		return nil
	}
	base := "https://" + host + "/" + path + sep
	return func(hash string) string { return base + url.PathEscape(hash) }
}

// remotePath splits a remote URL into host and path.
func remotePath(repo string) (host, path string, ok bool) {
	if u, err := url.Parse(repo); err == nil && u.Host != "" {
		switch u.Scheme {
		case "https", "http", "ssh", "git":
			return strings.ToLower(u.Hostname()), u.Path, true
		}
		return "", "", false
	}
	// scp-like: [user@]host:path, with no slash before the colon.
	at := strings.Index(repo, "@")
	colon := strings.Index(repo, ":")
	if colon > 0 && !strings.Contains(repo[:colon], "/") && at < colon {
		return strings.ToLower(repo[at+1 : colon]), repo[colon+1:], true
	}
	return "", "", false
}
