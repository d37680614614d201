package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/prereqs"
)

// browser starts headless Chromium for the test; its context ends with
// the test.
func browser(t testing.TB) context.Context {
	t.Helper()
	exe := prereqs.LookPath(t, "chromium")
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // tests may run as root, where Chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	// Start the browser now (no timeout on this first call: it would
	// bound the browser's life), so a missing library fails here, clearly.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return ctx
}

// do runs steps with a timeout.
func do(t testing.TB, ctx context.Context, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t testing.TB, ctx context.Context, expr string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		t.Fatalf("browser: %s: %v", expr, err)
	}
	return v
}

// row is a cluster's row as the browser shows it.
type row struct {
	// State is the text of the state cell, as a reader without colour
	// sees it; Attr the row's data-state.
	State  string `json:"state"`
	Attr   string `json:"attr"`
	Hidden bool   `json:"hidden"`
	Text   string `json:"text"`
}

// readRows reads every cluster's row from the page in the browser.
const readRows = `(() => {
  const out = {};
  document.querySelectorAll("tbody.cluster").forEach(b => {
    out[b.dataset.cluster] = {state: b.querySelector("tr > td .state").textContent.trim(), attr: b.dataset.state,
      hidden: b.hidden, text: b.textContent.replace(/\s+/g, " ")};
  });
  return JSON.stringify(out);
})()`

func rows(t testing.TB, ctx context.Context) map[string]row {
	t.Helper()
	js := eval[string](t, ctx, readRows)
	out := map[string]row{}
	if err := json.Unmarshal([]byte(js), &out); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	return out
}

// waitRows polls the page (never reloading it) until cond holds.
func waitRows(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func(map[string]row) bool) map[string]row {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[string]row
	for time.Now().Before(deadline) {
		last = rows(t, ctx)
		if cond(last) {
			return last
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("timed out after %v waiting for the page to show %s; last rows:\n%s", timeout, what, describe(last))
	return nil
}

func describe(rows map[string]row) string {
	var b strings.Builder
	for name, r := range rows {
		fmt.Fprintf(&b, "  %s: %s (%s) %s\n", name, r.State, r.Attr, r.Text)
	}
	return b.String()
}

// text returns the text content of the first element matching sel.
func text(t testing.TB, ctx context.Context, sel string) string {
	t.Helper()
	return strings.TrimSpace(eval[string](t, ctx, fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent.replace(/\s+/g, " ")`, sel)))
}

// screenshot saves the page as docs/images/<name>.png when the test runs
// with -update-screenshots.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if !*updateScreenshots {
		return
	}
	c, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(agentproc.ModuleRoot(), "docs", "images", name+".png")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", p)
}
