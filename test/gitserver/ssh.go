package gitserver

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshServer serves git-upload-pack and git-receive-pack over SSH, the way
// forges do: any login name, the public key identifies the user.
type sshServer struct {
	s       *Server
	addr    string
	config  *ssh.ServerConfig
	hostKey ssh.PublicKey

	mu    sync.Mutex
	keys  map[string]string // marshalled public key → user
	ln    net.Listener
	conns map[net.Conn]bool
}

func newSSHServer(s *Server, addr string) (*sshServer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	x := &sshServer{s: s, hostKey: signer.PublicKey(), keys: map[string]string{}, conns: map[net.Conn]bool{}}
	x.config = &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			x.mu.Lock()
			user, ok := x.keys[string(key.Marshal())]
			x.mu.Unlock()
			if !ok {
				return nil, errors.New("unknown key")
			}
			return &ssh.Permissions{Extensions: map[string]string{"user": user}}, nil
		},
	}
	x.config.AddHostKey(signer)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ssh listen: %w", err)
	}
	x.addr = ln.Addr().String()
	x.serve(ln)
	return x, nil
}

func (x *sshServer) serve(ln net.Listener) {
	x.mu.Lock()
	x.ln = ln
	x.mu.Unlock()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			x.mu.Lock()
			x.conns[nc] = true
			x.mu.Unlock()
			go x.handleConn(nc)
		}
	}()
}

func (x *sshServer) stop() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ln != nil {
		x.ln.Close()
		x.ln = nil
	}
	for c := range x.conns {
		c.Close()
	}
}

func (x *sshServer) start() error {
	x.mu.Lock()
	running := x.ln != nil
	x.mu.Unlock()
	if running {
		return nil
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", x.addr); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("gitserver: ssh relisten on %s: %w", x.addr, err)
	}
	x.serve(ln)
	return nil
}

func (x *sshServer) handleConn(nc net.Conn) {
	x.s.inflight.Add(1)
	defer x.s.inflight.Done()
	defer func() {
		nc.Close()
		x.mu.Lock()
		delete(x.conns, nc)
		x.mu.Unlock()
	}()
	conn, chans, reqs, err := ssh.NewServerConn(nc, x.config)
	if err != nil {
		x.s.logs.Printf("ssh: handshake from %s: %v", nc.RemoteAddr(), err)
		return
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	user := conn.Permissions.Extensions["user"]
	for nch := range chans {
		if nch.ChannelType() != "session" {
			nch.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		go x.handleSession(user, ch, creqs)
	}
}

func (x *sshServer) handleSession(user string, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "env":
			req.Reply(true, nil) // ignored: protocol v0 only, like over HTTP
		case "exec":
			var payload struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
				req.Reply(false, nil)
				return
			}
			req.Reply(true, nil)
			code := x.run(user, payload.Command, ch)
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{code}))
			return
		default:
			req.Reply(false, nil)
		}
	}
}

// run executes "git-upload-pack '<repo>.git'" or "git-receive-pack ..." for user.
func (x *sshServer) run(user, command string, ch ssh.Channel) uint32 {
	service, arg, ok := strings.Cut(command, " ")
	if !ok || (service != "git-upload-pack" && service != "git-receive-pack") {
		fmt.Fprintf(ch.Stderr(), "gitserver: unsupported command\n")
		return 1
	}
	repo := strings.TrimSuffix(strings.TrimPrefix(strings.Trim(arg, "'\""), "/"), ".git")
	if !repoName.MatchString(repo) || strings.Contains(repo, "..") {
		fmt.Fprintf(ch.Stderr(), "gitserver: invalid repository\n")
		return 1
	}
	if _, err := os.Stat(x.s.RepoPath(repo)); err != nil {
		fmt.Fprintf(ch.Stderr(), "gitserver: repository not found\n")
		return 1
	}
	x.s.logs.Printf("ssh %s %s user=%q", service, repo, user)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", strings.TrimPrefix(service, "git-"), x.s.RepoPath(repo))
	cmd.Env = append(os.Environ(),
		"HOME="+x.s.homeDir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "REMOTE_USER="+user)
	// Not cmd.Stdin = ch: Wait would wait for a client that waits for us.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 1
	}
	go func() { io.Copy(stdin, ch); stdin.Close() }()
	cmd.Stdout = ch
	var stderr bytes.Buffer
	cmd.Stderr = io.MultiWriter(ch.Stderr(), &stderr)
	err = cmd.Run()
	if stderr.Len() > 0 {
		x.s.logs.Printf("ssh %s stderr: %s", service, strings.TrimSpace(stderr.String()))
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return uint32(exit.ExitCode())
	}
	if err != nil {
		return 1
	}
	return 0
}

// SSHURL is the ssh:// clone URL of repo; Config.SSH must be set.
func (s *Server) SSHURL(repo string) string {
	if s.ssh == nil {
		return ""
	}
	return "ssh://git@" + s.ssh.addr + "/" + repo + ".git"
}

// KnownHosts is a known_hosts line for the SSH endpoint's host key.
func (s *Server) KnownHosts() []byte {
	if s.ssh == nil {
		return nil
	}
	host, port, _ := net.SplitHostPort(s.ssh.addr)
	return []byte("[" + host + "]:" + port + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.ssh.hostKey))) + "\n")
}

// AddSSHKey lets user authenticate over SSH with the public key given in
// authorized_keys format. The login name does not matter, as on forges.
func (s *Server) AddSSHKey(user string, authorizedKey []byte) error {
	if s.ssh == nil {
		return errors.New("gitserver: SSH not enabled")
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey(authorizedKey)
	if err != nil {
		return fmt.Errorf("gitserver: ssh key for %s: %w", user, err)
	}
	s.ssh.mu.Lock()
	s.ssh.keys[string(key.Marshal())] = user
	s.ssh.mu.Unlock()
	return nil
}
