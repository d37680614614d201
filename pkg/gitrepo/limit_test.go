package gitrepo_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

// TestSyncFetchTooLarge: a new head whose pack exceeds MaxFetchSize fails
// with ErrTooLarge, keeps the last good checkout, leaves no temporary pack
// behind and does not count as an outage; a larger limit fetches it.
func TestSyncFetchTooLarge(t *testing.T) {
	srv, auth := fleet(t, fleetFiles)
	ctx := context.Background()
	cache := t.TempDir()
	const limit = 1 << 20
	src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: cache, MaxFetchSize: limit}
	good, err := src.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Random bytes do not compress: the pack is as large as the blob.
	blob := make([]byte, 4*limit)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	big := commitMain(t, srv, map[string][]byte{"big.bin": blob})
	for range 2 {
		_, err = src.Sync(ctx)
		if !errors.Is(err, gitrepo.ErrTooLarge) {
			t.Fatalf("sync of a %d-byte blob with a %d-byte limit: %v, want ErrTooLarge", len(blob), limit, err)
		}
		if errors.Is(err, gitrepo.ErrUnreachable) {
			t.Errorf("too large is classified as an outage too: %v", err)
		}
	}
	t.Logf("error: %v", err)
	if last, ok := src.LastGood(); !ok || last.Hash != good.Hash {
		t.Errorf("LastGood after the refused fetch: %+v %v, want %s", last, ok, good.Hash)
	}
	if tmps, _ := filepath.Glob(filepath.Join(cache, "repo", "objects", "pack", "tmp_*")); len(tmps) > 0 {
		t.Errorf("temporary packs left behind: %v", tmps)
	}

	src2 := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: cache, MaxFetchSize: 8 * limit}
	res, err := src2.Sync(ctx)
	if err != nil {
		t.Fatalf("sync with a larger limit: %v", err)
	}
	if res.Hash != big {
		t.Errorf("head %s, want %s", res.Hash, big)
	}
}

// TestSyncTamperedCheckout: a checkout altered on disk between two runs is
// not returned by LastGood nor reused by Sync; Sync exports it again.
func TestSyncTamperedCheckout(t *testing.T) {
	srv, auth := fleet(t, fleetFiles)
	ctx := context.Background()
	cache := t.TempDir()
	src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: cache}
	res, err := src.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(res.Dir, "clusters", "member1.yaml")
	_ = os.Chmod(f, 0o644)
	if err := os.WriteFile(f, []byte("name: evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	restarted := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: cache}
	if last, ok := restarted.LastGood(); ok {
		t.Errorf("LastGood returned a tampered checkout: %+v", last)
	}
	res2, err := restarted.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, res2.Dir); res2.Hash != res.Hash || !equalFiles(got, fleetFiles) {
		t.Errorf("after re-sync: %s %v", res2.Hash, got)
	}
	// Untouched, it is trusted again after a restart (offline too).
	again := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: cache}
	if last, ok := again.LastGood(); !ok || last.Hash != res.Hash {
		t.Errorf("LastGood of an intact checkout: %+v %v", last, ok)
	}
}
