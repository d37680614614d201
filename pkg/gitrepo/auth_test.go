package gitrepo_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testkeys"
)

func TestLoadAuth(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"username":    "agent-member1\n",
		"password":    "s3cr3t-pw\n",
		"bearerToken": "tok-123\n",
		"known_hosts": "host ssh-ed25519 AAAA\n",
		"ca.crt":      "-----BEGIN CERTIFICATE-----\n",
	})
	a, err := gitrepo.LoadAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Username != "agent-member1" || a.Password != "s3cr3t-pw" || a.BearerToken != "tok-123" || len(a.KnownHosts) == 0 || len(a.CABundle) == 0 || a.SSHKey != nil {
		t.Fatalf("LoadAuth = %s %+v", a, a.Username)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(format, a); strings.Contains(out, "s3cr3t") || strings.Contains(out, "tok-123") {
			t.Fatalf("%s prints a secret: %s", format, out)
		}
	}
	if _, err := gitrepo.LoadAuth(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing secret directory accepted")
	}
	empty, err := gitrepo.LoadAuth(t.TempDir())
	if err != nil || empty.String() != "anonymous" {
		t.Fatalf("empty secret = %s, %v", empty, err)
	}
}

func TestBearerToken(t *testing.T) {
	srv, _ := fleet(t, fleetFiles)
	if err := srv.AddToken(gitserver.Maintainer, "tok-abc"); err != nil {
		t.Fatal(err)
	}
	src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: gitrepo.Auth{BearerToken: "tok-abc"}, CacheDir: t.TempDir()}
	if _, err := src.Sync(context.Background()); err != nil {
		t.Fatalf("sync with a bearer token: %v", err)
	}
	src = &gitrepo.Source{URL: srv.URL("fleet"), Auth: gitrepo.Auth{BearerToken: "wrong"}, CacheDir: t.TempDir()}
	if _, err := src.Sync(context.Background()); !errors.Is(err, gitrepo.ErrAuth) {
		t.Fatalf("wrong token: %v", err)
	}
}

func TestSSHTransport(t *testing.T) {
	cfg := gitserver.ForgeConfig("member1")
	cfg.SSH = true
	srv := gitserver.Start(t, cfg)
	srv.MustCreateRepo(t, "fleet", writeDir(t, fleetFiles))
	key := testkeys.SSH(t, "agent-member1")
	if err := srv.AddSSHKey(gitserver.AgentUser("member1"), []byte(key.Public)); err != nil {
		t.Fatal(err)
	}
	// Write the credentials as a mounted Secret would hold them.
	secret := writeDir(t, map[string]string{"identity": string(key.Private), "known_hosts": string(srv.KnownHosts())})
	auth, err := gitrepo.LoadAuth(secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	src := &gitrepo.Source{URL: srv.SSHURL("fleet"), Auth: auth, CacheDir: t.TempDir()}
	res, err := src.Sync(ctx)
	if err != nil {
		t.Fatalf("sync over ssh: %v", err)
	}
	if !equalFiles(readDir(t, res.Dir), fleetFiles) {
		t.Fatal("wrong checkout over ssh")
	}
	if res2, err := src.Sync(ctx); err != nil || res2.Fetched {
		t.Fatalf("idle sync over ssh: %+v, %v", res2, err)
	}
	w := gitrepo.NewWriter(srv.SSHURL("fleet"), gitrepo.PushOptions{Auth: auth})
	if _, err := w.PushFiles(ctx, statusRef("member1"), map[string][]byte{"status.yaml": []byte("ssh\n")}, "s", agent("member1")); err != nil {
		t.Fatalf("push over ssh: %v", err)
	}
	if _, err := w.PushFiles(ctx, "refs/heads/main", map[string][]byte{"x": []byte("x")}, "s", agent("member1")); !errors.Is(err, gitrepo.ErrRejected) {
		t.Fatalf("push to main over ssh: %v, want ErrRejected", err)
	}

	otherHost := "[127.0.0.1]:1 " + testkeys.SSH(t, "x").Line() + "\n"
	wrongHostKey := strings.Replace(otherHost, "[127.0.0.1]:1", strings.Fields(string(srv.KnownHosts()))[0], 1)
	for _, tc := range []struct {
		name string
		auth gitrepo.Auth
		want error
	}{
		{"unknown client key", gitrepo.Auth{SSHKey: testkeys.SSH(t, "x").Private, KnownHosts: srv.KnownHosts()}, gitrepo.ErrAuth},
		{"host key mismatch", gitrepo.Auth{SSHKey: key.Private, KnownHosts: []byte(wrongHostKey)}, gitrepo.ErrAuth},
		{"host not in known_hosts", gitrepo.Auth{SSHKey: key.Private, KnownHosts: []byte(otherHost)}, gitrepo.ErrAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &gitrepo.Source{URL: srv.SSHURL("fleet"), Auth: tc.auth, CacheDir: t.TempDir()}
			_, err := src.Sync(ctx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
	t.Run("no known_hosts", func(t *testing.T) {
		src := &gitrepo.Source{URL: srv.SSHURL("fleet"), Auth: gitrepo.Auth{SSHKey: key.Private}, CacheDir: t.TempDir()}
		if _, err := src.Sync(ctx); err == nil {
			t.Fatal("ssh without known_hosts accepted")
		}
	})
	t.Run("outage", func(t *testing.T) {
		srv.Stop()
		defer srv.Start()
		if _, err := src.Sync(ctx); !errors.Is(err, gitrepo.ErrUnreachable) {
			t.Fatalf("sync over ssh while down: %v", err)
		}
	})
}
