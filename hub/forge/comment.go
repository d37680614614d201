package forge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxComment bounds a comment's body (GitHub's limit is 65,536
// characters; GitLab's and Gitea's are larger).
const maxComment = 65000

// UpsertComment makes body the one comment of the pull (merge) request
// number that carries marker (an HTML comment such as
// "<!-- flotilla-plan -->", invisible when rendered): it edits the
// newest such comment, or posts a new one when there is none. It returns
// the comment's id.
func (f *Client) UpsertComment(ctx context.Context, number int, marker, body string) (int64, error) {
	if !strings.Contains(body, marker) {
		body = marker + "\n" + body
	}
	if r := []rune(body); len(r) > maxComment {
		body = string(r[:maxComment]) + "\n\n… (truncated)"
	}
	base := f.commentsPath(number)
	id, err := f.findComment(ctx, base, marker)
	if err != nil {
		return 0, fmt.Errorf("comment on #%d: %w", number, err)
	}
	var created struct {
		ID int64 `json:"id"`
	}
	payload := map[string]string{"body": body}
	switch {
	case id == 0:
		err = f.do(ctx, http.MethodPost, base, payload, &created)
		id = created.ID
	case f.kind == GitLab:
		err = f.do(ctx, http.MethodPut, base+"/"+strconv.FormatInt(id, 10), payload, nil)
	default:
		err = f.do(ctx, http.MethodPatch, "/repos/"+f.repo+"/issues/comments/"+strconv.FormatInt(id, 10), payload, nil)
	}
	if err != nil {
		return 0, fmt.Errorf("comment on #%d: %w", number, err)
	}
	return id, nil
}

func (f *Client) commentsPath(number int) string {
	if f.kind == GitLab {
		return "/projects/" + url.PathEscape(f.repo) + "/merge_requests/" + strconv.Itoa(number) + "/notes"
	}
	return "/repos/" + f.repo + "/issues/" + strconv.Itoa(number) + "/comments"
}

// findComment pages through the request's comments for the newest one
// carrying marker; 0 when there is none. A page with no comment not seen
// before ends the listing (Gitea lists them all at once, ignoring pages).
func (f *Client) findComment(ctx context.Context, base, marker string) (int64, error) {
	var found int64
	seen := map[int64]bool{}
	for page := 1; page <= 100; page++ {
		var comments []struct {
			ID   int64  `json:"id"`
			Body string `json:"body"`
		}
		if err := f.do(ctx, http.MethodGet, base+"?per_page=100&page="+strconv.Itoa(page), nil, &comments); err != nil {
			return 0, err
		}
		fresh := false
		for _, c := range comments {
			if seen[c.ID] {
				continue
			}
			seen[c.ID], fresh = true, true
			if strings.Contains(c.Body, marker) && c.ID > found {
				found = c.ID
			}
		}
		if !fresh || len(comments) < 100 {
			break
		}
	}
	return found, nil
}
