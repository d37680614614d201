package gitserver

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/test/prereqs"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	treefile.Write(t, dir, files)
	return dir
}

func TestCreateRepoAndClone(t *testing.T) {
	srv := Start(t, ForgeConfig("member1"))
	src := writeTree(t, map[string]string{"clusters/member1.yaml": "name: member1\n", "README.md": "fleet\n"})
	url := srv.MustCreateRepo(t, "fleet", src)
	if url != "http://"+srv.Addr()+"/fleet.git" {
		t.Fatalf("url = %s", url)
	}
	dst := filepath.Join(t.TempDir(), "clone")
	if out, err := GitErr(t, "", "clone", "-q", srv.UserURL("fleet", AgentUser("member1")), dst); err != nil {
		t.Fatalf("clone: %v: %s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dst, "clusters/member1.yaml"))
	if err != nil || string(got) != "name: member1\n" {
		t.Fatalf("cloned file = %q, %v", got, err)
	}
	if head := srv.Head("fleet", "main"); len(head) != 40 {
		t.Fatalf("Head = %q", head)
	}
	st := srv.Stats("fleet")
	if st.InfoRefs != 1 || st.UploadPacks != 1 || st.UploadPackBytesSent == 0 {
		t.Fatalf("stats after clone = %+v", st)
	}
	if _, err := srv.CreateRepo("fleet", ""); err == nil {
		t.Fatal("creating an existing repo succeeded")
	}
	if _, err := srv.CreateRepo("../evil", ""); err == nil {
		t.Fatal("creating an escaping repo succeeded")
	}
}

func TestAuthentication(t *testing.T) {
	for _, tc := range []struct {
		name    string
		anon    bool
		url     func(s *Server) string
		wantErr bool
	}{
		{"no credentials, anonymous read off", false, func(s *Server) string { return s.URL("r") }, true},
		{"wrong password", false, func(s *Server) string { return "http://maintainer:nope@" + s.Addr() + "/r.git" }, true},
		{"unknown user", false, func(s *Server) string { return "http://mallory:x@" + s.Addr() + "/r.git" }, true},
		{"valid user", false, func(s *Server) string { return s.UserURL("r", Maintainer) }, false},
		{"anonymous read on", true, func(s *Server) string { return s.URL("r") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ForgeConfig()
			cfg.AnonymousRead = tc.anon
			srv := Start(t, cfg)
			srv.MustCreateRepo(t, "r", writeTree(t, map[string]string{"a": "1"}))
			out, err := GitErr(t, "", "ls-remote", tc.url(srv), "refs/heads/main")
			if tc.wantErr != (err != nil) {
				t.Fatalf("ls-remote err = %v (want error %v): %s", err, tc.wantErr, out)
			}
			if !tc.wantErr && !strings.Contains(out, "refs/heads/main") {
				t.Fatalf("ls-remote output %q", out)
			}
			if tc.wantErr && srv.Stats("r").Unauthorized == 0 {
				t.Fatal("no 401 counted")
			}
		})
	}
}

func TestAnonymousPushRefused(t *testing.T) {
	cfg := ForgeConfig()
	cfg.AnonymousRead = true
	srv := Start(t, cfg)
	srv.MustCreateRepo(t, "r", writeTree(t, map[string]string{"a": "1"}))
	work := filepath.Join(t.TempDir(), "w")
	if out, err := GitErr(t, "", "clone", "-q", srv.URL("r"), work); err != nil {
		t.Fatalf("anonymous clone: %v: %s", err, out)
	}
	Git(t, work, "-c", "user.name=x", "-c", "user.email=x@y", "commit", "-q", "--allow-empty", "-m", "anon")
	if out, err := GitErr(t, work, "push", "origin", "HEAD:main"); err == nil {
		t.Fatalf("anonymous push succeeded: %s", out)
	}
	if got := srv.Stats("r").ReceivePacks; got != 0 {
		t.Fatalf("receive-pack ran %d times for an anonymous push", got)
	}
}

func TestRefRules(t *testing.T) {
	srv := Start(t, ForgeConfig("member1", "member2"))
	srv.MustCreateRepo(t, "fleet", writeTree(t, map[string]string{"a": "1"}))
	ctx := context.Background()
	// Status refs exist before the table so updates are updates, not creations.
	for _, c := range []string{"member1", "member2"} {
		if _, err := srv.Push(ctx, "fleet", AgentUser(c), Change{Branch: "flotilla/status/" + c, Orphan: true, Files: map[string]string{"status.yaml": c}}); err != nil {
			t.Fatalf("seed status of %s: %v", c, err)
		}
	}
	for _, tc := range []struct {
		name   string
		user   string
		change Change
		allow  bool
	}{
		{"maintainer fast-forwards main", Maintainer, Change{Files: map[string]string{"b": "2"}}, true},
		{"maintainer cannot force-push main", Maintainer, Change{Orphan: true, Force: true, Files: map[string]string{"c": "3"}}, false},
		{"maintainer may push a feature branch", Maintainer, Change{Branch: "feature/x", Files: map[string]string{"d": "4"}}, true},
		{"maintainer may force a feature branch", Maintainer, Change{Branch: "feature/x", Orphan: true, Force: true, Files: map[string]string{"d": "5"}}, true},
		{"agent cannot push main", AgentUser("member1"), Change{Files: map[string]string{"e": "6"}}, false},
		{"agent pushes its status ref", AgentUser("member1"), Change{Branch: "flotilla/status/member1", Files: map[string]string{"status.yaml": "ok"}}, true},
		{"agent force-pushes its status ref", AgentUser("member1"), Change{Branch: "flotilla/status/member1", Orphan: true, Force: true, Files: map[string]string{"status.yaml": "squashed"}}, true},
		{"agent cannot push another cluster's status", AgentUser("member1"), Change{Branch: "flotilla/status/member2", Files: map[string]string{"status.yaml": "forged"}}, false},
		{"agent cannot create other branches", AgentUser("member2"), Change{Branch: "flotilla/status/member2-evil", Files: map[string]string{"x": "y"}}, false},
		{"agent cannot force-push another cluster's status", AgentUser("member2"), Change{Branch: "flotilla/status/member1", Orphan: true, Force: true, Files: map[string]string{"status.yaml": "forged"}}, false},
		{"agent cannot create a feature branch", AgentUser("member1"), Change{Branch: "feature/agent", Files: map[string]string{"x": "y"}}, false},
		{"maintainer may push a status ref (its refs/heads/* rule)", Maintainer, Change{Branch: "flotilla/status/member1", Files: map[string]string{"status.yaml": "by hand"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := srv.Refs("fleet")
			hash, err := srv.Push(ctx, "fleet", tc.user, tc.change)
			after, _ := srv.Refs("fleet")
			if tc.allow {
				if err != nil {
					t.Fatalf("push refused: %v", err)
				}
				branch := tc.change.Branch
				if branch == "" {
					branch = "main"
				}
				if after["refs/heads/"+branch] != hash {
					t.Fatalf("ref not updated: %s != %s", after["refs/heads/"+branch], hash)
				}
				return
			}
			if !errors.Is(err, ErrPushRejected) {
				t.Fatalf("err = %v, want ErrPushRejected", err)
			}
			if !strings.Contains(err.Error(), "gitserver: user "+tc.user) {
				t.Fatalf("rejection does not carry the hook's message: %v", err)
			}
			if len(before) != len(after) {
				t.Fatalf("refs changed on a rejected push: %v -> %v", before, after)
			}
			for k, v := range before {
				if after[k] != v {
					t.Fatalf("ref %s changed on a rejected push", k)
				}
			}
		})
	}
}

func TestSetRulesAndAddUser(t *testing.T) {
	srv := Start(t, ForgeConfig())
	srv.MustCreateRepo(t, "r", writeTree(t, map[string]string{"a": "1"}))
	ctx := context.Background()
	if err := srv.AddUser("agent-edge1", "pw", AgentRule("edge1")); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Push(ctx, "r", "agent-edge1", Change{Branch: "flotilla/status/edge1", Files: map[string]string{"s": "1"}}); err != nil {
		t.Fatalf("new user push: %v", err)
	}
	if err := srv.SetRules(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Push(ctx, "r", Maintainer, Change{Files: map[string]string{"b": "2"}}); !errors.Is(err, ErrPushRejected) {
		t.Fatalf("push with no rules: %v", err)
	}
	if err := srv.AddUser("bad user", "x"); err == nil {
		t.Fatal("invalid user name accepted")
	}
	if err := srv.SetRules([]Rule{{User: "u", Refs: []string{"refs/heads/$(reboot)"}}}); err == nil {
		t.Fatal("shell metacharacters accepted in a ref pattern")
	}
}

func TestStatsCountOperations(t *testing.T) {
	srv := Start(t, ForgeConfig())
	srv.MustCreateRepo(t, "r", writeTree(t, map[string]string{"a": "1"}))
	url := srv.UserURL("r", Maintainer)

	before := srv.Stats("r")
	if out, err := GitErr(t, "", "ls-remote", url); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	d := srv.Stats("r").Sub(before)
	if d.InfoRefs != 1 || d.UploadPacks != 0 || d.BytesSent == 0 {
		t.Fatalf("ls-remote stats = %+v", d)
	}

	before = srv.Stats("r")
	srv.Commit(t, "r", Maintainer, map[string]string{"big": strings.Repeat("x", 3<<20)}, nil, "big")
	d = srv.Stats("r").Sub(before)
	if d.ReceivePacks != 1 || d.ReceivePackInfoRefs == 0 || d.UploadPacks == 0 || d.ReceivePackBytes < 1000 {
		t.Fatalf("commit stats = %+v", d)
	}
}

func TestChunkedPush(t *testing.T) {
	// Above http.postBuffer the git CLI sends a chunked body, which CGI
	// cannot take as is.
	srv := Start(t, ForgeConfig())
	srv.MustCreateRepo(t, "r", "")
	work := t.TempDir()
	Git(t, work, "init", "-q", "-b", "main")
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i*7919 + i/13) // poorly compressible
	}
	os.WriteFile(filepath.Join(work, "blob"), big, 0o644)
	Git(t, work, "add", ".")
	if out, err := GitErr(t, work, "-c", "user.name=m", "-c", "user.email=m@x", "commit", "-q", "-m", "big"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := GitErr(t, work, "-c", "http.postBuffer=65536", "push", "-q", srv.UserURL("r", Maintainer), "HEAD:refs/heads/main"); err != nil {
		t.Fatalf("push: %v: %s", err, out)
	}
	if srv.Head("r", "main") == "" {
		t.Fatal("main not created")
	}
}

func TestStopStart(t *testing.T) {
	srv := Start(t, ForgeConfig())
	srv.MustCreateRepo(t, "r", writeTree(t, map[string]string{"a": "1"}))
	url := srv.UserURL("r", Maintainer)
	if out, err := GitErr(t, "", "ls-remote", url); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	srv.Stop()
	if out, err := GitErr(t, "", "ls-remote", url); err == nil {
		t.Fatalf("ls-remote worked while stopped: %s", out)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if out, err := GitErr(t, "", "ls-remote", url); err != nil {
		t.Fatalf("after restart: %v: %s", err, out)
	}
}

func TestSetDelay(t *testing.T) {
	srv := Start(t, ForgeConfig())
	srv.MustCreateRepo(t, "r", writeTree(t, map[string]string{"a": "1"}))
	// An hour's delay against a 200ms client timeout: only the delay can
	// make the request fail. Without it, the same request must succeed with
	// no timeout of its own, however slow the machine.
	srv.SetDelay(time.Hour)
	client := &http.Client{Timeout: 200 * time.Millisecond}
	req, _ := http.NewRequest("GET", srv.URL("r")+"/info/refs?service=git-upload-pack", nil)
	req.SetBasicAuth(Maintainer, srv.Password(Maintainer))
	if _, err := client.Do(req); err == nil {
		t.Fatal("request did not time out")
	}
	srv.SetDelay(0)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestNewStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, t.TempDir(), ForgeConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv.MustCreateRepo(t, "r", "")
	cancel()
	// Generous: a busy machine may take a while to close the listener; the
	// happy path leaves at once.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := http.Get(srv.URL("r") + "/info/refs")
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server still serving after its context ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := srv.Start(); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

func TestSSH(t *testing.T) {
	cfg := ForgeConfig("member1")
	cfg.SSH = true
	prereqs.Require(t, "ssh", "ssh-keygen")
	srv := Start(t, cfg)
	srv.MustCreateRepo(t, "fleet", writeTree(t, map[string]string{"a": "1"}))
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "agent", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, _ := os.ReadFile(key + ".pub")
	if err := srv.AddSSHKey(AgentUser("member1"), pub); err != nil {
		t.Fatal(err)
	}
	kh := filepath.Join(dir, "known_hosts")
	os.WriteFile(kh, srv.KnownHosts(), 0o644)
	sshCmd := "ssh -i " + key + " -o UserKnownHostsFile=" + kh + " -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -o BatchMode=yes"
	run := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_SSH_COMMAND="+sshCmd, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
			"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@x")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	work := filepath.Join(dir, "w")
	if out, err := run(dir, "clone", "-q", srv.SSHURL("fleet"), work); err != nil {
		t.Fatalf("ssh clone: %v: %s", err, out)
	}
	run(work, "commit", "-q", "--allow-empty", "-m", "x")
	if out, err := run(work, "push", "-q", "origin", "HEAD:refs/heads/flotilla/status/member1"); err != nil {
		t.Fatalf("ssh push of the own status ref: %v: %s", err, out)
	}
	if out, err := run(work, "push", "-q", "origin", "HEAD:refs/heads/main"); err == nil || !strings.Contains(out, "may not push refs/heads/main") {
		t.Fatalf("ssh push to main by the agent: %v: %s", err, out)
	}
	// An unknown key is refused.
	other := filepath.Join(dir, "other")
	exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).Run()
	sshCmd = strings.Replace(sshCmd, key, other, 1)
	if out, err := run(dir, "ls-remote", srv.SSHURL("fleet")); err == nil {
		t.Fatalf("unknown key accepted: %s", out)
	}
}
