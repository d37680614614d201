package dashboard

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/plural"
)

var (
	//go:embed assets/page.html.tmpl
	pageSource string
	//go:embed assets/dashboard.css
	css string
	//go:embed assets/dashboard.js
	js string

	page = template.Must(template.New("page").Funcs(template.FuncMap{"count": count}).Parse(pageSource))

	// contentSecurityPolicy allows the page's own inline style and script
	// (by hash) and fetches from its own origin, nothing else.
	contentSecurityPolicy = fmt.Sprintf("default-src 'none'; style-src '%s'; script-src '%s'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
		sha256Source(css), sha256Source(js))
)

func sha256Source(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// PageOptions say how a page refreshes itself.
type PageOptions struct {
	// Refresh is how often the page fetches FragmentURL and swaps it in;
	// 0 makes a snapshot that does not refresh (status -o html).
	Refresh     time.Duration
	FragmentURL string
}

type pageData struct {
	Model       *Model
	CSS         template.CSS
	JS          template.JS
	Refresh     int
	RefreshText string
	FragmentURL string
}

// WritePage writes the whole page, styles and script inlined.
func WritePage(w io.Writer, m *Model, o PageOptions) error {
	d := pageData{Model: m, CSS: template.CSS(css), JS: template.JS(js)}
	if o.Refresh > 0 && o.FragmentURL != "" {
		// Whole seconds: the script's interval; at least one.
		d.Refresh = max(1, int(o.Refresh.Round(time.Second)/time.Second))
		d.RefreshText = o.Refresh.String()
		d.FragmentURL = o.FragmentURL
	}
	return execute(w, "page", d)
}

// WriteFragment writes the part of the page that refreshes.
func WriteFragment(w io.Writer, m *Model) error {
	return execute(w, "fragment", m)
}

// execute renders into a buffer first, so a failing template never
// leaves half a page behind.
func execute(w io.Writer, name string, data any) error {
	var b bytes.Buffer
	if err := page.ExecuteTemplate(&b, name, data); err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// count is "1 unit", "3 units".
func count(n any, one, many string) string {
	switch n := n.(type) {
	case int:
		return plural.Count(n, one, many)
	case int64:
		return plural.Count(int(n), one, many)
	}
	return fmt.Sprint(n, " ", many)
}
