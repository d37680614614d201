package redact

import "net/url"

// URL is raw without its credentials. An http(s) URL loses its whole
// userinfo (a token is often passed as the user name); an ssh URL keeps its
// user name (git@…), which is not a credential, and loses any password.
// Text that does not parse as a URL is returned as it is.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if u.Scheme == "http" || u.Scheme == "https" {
		u.User = nil
	} else {
		u.User = url.User(u.User.Username())
	}
	return u.String()
}
