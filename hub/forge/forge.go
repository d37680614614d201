package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// State is a commit status's state, as GitHub and Gitea name them.
type State string

// The states notify sets.
const (
	StatePending State = "pending"
	StateSuccess State = "success"
	StateFailure State = "failure"
)

// CommitStatus is one status on a commit.
type CommitStatus struct {
	// Commit is the full hash of the commit.
	Commit string `json:"commit"`
	// Context names the check ("flotilla/<application>").
	Context     string `json:"context"`
	State       State  `json:"state"`
	Description string `json:"description"`
	// TargetURL links the dashboard, when one is configured.
	TargetURL string `json:"targetURL,omitempty"`
}

// maxDescription is GitHub's limit on a status description.
const maxDescription = 140

// Forge kinds.
const (
	GitHub = "github"
	Gitea  = "gitea"
	GitLab = "gitlab"
)

// ErrRequest: the forge refused or failed a request; the error says its
// HTTP status and message (never the token).
var ErrRequest = errors.New("forge request failed")

// Client calls the fleet repo's forge: commit statuses and comments.
type Client struct {
	kind  string
	api   string // base URL of the API
	repo  string // owner/name, or GitLab's project path or id
	token string
	http  *http.Client
}

// Options say which forge and repository.
type Options struct {
	// Kind is GitHub, Gitea or GitLab.
	Kind string
	// URL is the forge's base URL (https://github.com, https://gitlab.com,
	// https://gitea.example.com); the API's is derived from it
	// (api.github.com for github.com, <url>/api/v3 for GitHub Enterprise,
	// <url>/api/v1 for Gitea, <url>/api/v4 for GitLab).
	URL string
	// Repo is "owner/name" (GitLab: the project's full path or its id).
	Repo  string
	Token string
	// Timeout bounds each request; 30s when zero.
	Timeout time.Duration
}

// New checks o and returns its client.
func New(o Options) (*Client, error) {
	switch o.Kind {
	case GitHub, Gitea, GitLab:
	default:
		return nil, fmt.Errorf("forge %q: want %s, %s or %s", o.Kind, GitHub, GitLab, Gitea)
	}
	u, err := url.Parse(strings.TrimSuffix(o.URL, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("forge URL %q: want http(s)://host[/path]", o.URL)
	}
	if o.Repo == "" || strings.Trim(o.Repo, "/") != o.Repo {
		return nil, fmt.Errorf("forge repository %q: want owner/name", o.Repo)
	}
	if o.Token == "" {
		return nil, errors.New("forge token: none given")
	}
	var api string
	switch o.Kind {
	case GitHub:
		api = u.String() + "/api/v3"
		if u.Host == "github.com" {
			api = "https://api.github.com"
		}
	case Gitea:
		api = u.String() + "/api/v1"
	case GitLab:
		api = u.String() + "/api/v4"
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &Client{kind: o.Kind, api: api, repo: o.Repo, token: o.Token, http: &http.Client{Timeout: timeout}}, nil
}

// SetStatus creates (or replaces, by context) a status on s.Commit.
func (f *Client) SetStatus(ctx context.Context, s CommitStatus) error {
	desc := s.Description
	if r := []rune(desc); len(r) > maxDescription {
		desc = string(r[:maxDescription-1]) + "…"
	}
	var err error
	switch f.kind {
	case GitLab:
		state := string(s.State)
		if s.State == StateFailure {
			state = "failed"
		}
		err = f.do(ctx, http.MethodPost, "/projects/"+url.PathEscape(f.repo)+"/statuses/"+url.PathEscape(s.Commit),
			map[string]string{"state": state, "name": s.Context, "description": desc, "target_url": s.TargetURL}, nil)
	default:
		err = f.do(ctx, http.MethodPost, "/repos/"+f.repo+"/statuses/"+url.PathEscape(s.Commit),
			map[string]string{"state": string(s.State), "context": s.Context, "description": desc, "target_url": s.TargetURL}, nil)
	}
	if err != nil {
		return fmt.Errorf("set status %s on %s: %w", s.Context, short(s.Commit), err)
	}
	return nil
}

// do sends one API request with a JSON body (when not nil) and decodes a
// JSON answer into out (when not nil).
func (f *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.api+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	switch f.kind {
	case GitLab:
		req.Header.Set("PRIVATE-TOKEN", f.token)
	case Gitea:
		req.Header.Set("Authorization", "token "+f.token)
	default:
		req.Header.Set("Authorization", "Bearer "+f.token)
		req.Header.Set("Accept", "application/vnd.github+json")
	}
	resp, err := f.http.Do(req)
	if err != nil {
		// The URL holds no secret; the error may quote it.
		return fmt.Errorf("%w: %w", ErrRequest, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 512 {
			msg = msg[:512] + "…"
		}
		return fmt.Errorf("%w: %s %s: %s: %s", ErrRequest, method, path, resp.Status, msg)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%w: %s %s: %w", ErrRequest, method, path, err)
		}
	}
	return nil
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
