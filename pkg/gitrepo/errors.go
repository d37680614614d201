package gitrepo

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// Classified errors; test with errors.Is.
var (
	// ErrUnreachable: the remote could not be reached in time (connection
	// refused or reset, DNS, timeout, a 5xx from a proxy). Retrying later may help.
	ErrUnreachable = errors.New("git remote unreachable")
	// ErrAuth: the remote refused the credentials (HTTP 401/403, SSH auth,
	// unknown host key).
	ErrAuth = errors.New("git authentication failed")
	// ErrRepoNotFound: the remote has no such repository.
	ErrRepoNotFound = errors.New("git repository not found")
	// ErrRefNotFound: the remote has no such branch or ref.
	ErrRefNotFound = errors.New("git ref not found")
	// ErrRevisionNotFound: a revision does not resolve in a local repository
	// (or its objects are missing, e.g. beyond a shallow clone's depth).
	ErrRevisionNotFound = errors.New("git revision not found")
	// ErrRejected: the remote refused a push that was not a race with
	// another writer (protected ref, hook, permissions).
	ErrRejected = errors.New("git push rejected")
	// ErrConflict: the ref kept moving under a push until the attempts ran out.
	ErrConflict = errors.New("git push conflict: ref kept moving")
	// ErrUnsafePath: a tree entry or a file path would leave its directory
	// or write into a .git directory.
	ErrUnsafePath = errors.New("unsafe path")
	// ErrNotAncestor: a commit range's start is not an ancestor of its end
	// (history was rewritten).
	ErrNotAncestor = errors.New("not an ancestor")
	// ErrTooLarge: a fetch would download more than the configured maximum
	// (Source.MaxFetchSize); nothing of it is kept.
	ErrTooLarge = errors.New("git fetch too large")
)

// classify wraps a transport error with its class. op names the operation
// and remote is already redacted. When the caller's own context ended, its
// error is returned as is (wrapped), not as ErrUnreachable: stopping is not
// an outage.
func classify(parent context.Context, op, remote string, err error) error {
	if err == nil {
		return nil
	}
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("%s %s: %w", op, remote, perr)
	}
	switch {
	case errors.Is(err, ErrAuth):
		// The SSH auth callbacks already classified it.
		return fmt.Errorf("%s %s: %w", op, remote, err)
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed):
		return fmt.Errorf("%s %s: %w: %w", op, remote, ErrAuth, err)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("%s %s: %w: %w", op, remote, ErrRepoNotFound, err)
	case isUnreachable(err):
		return fmt.Errorf("%s %s: %w: %w", op, remote, ErrUnreachable, err)
	}
	return fmt.Errorf("%s %s: %w", op, remote, err)
}

func isUnreachable(err error) bool {
	var netErr net.Error
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	// Not io.EOF or io.ErrUnexpectedEOF: a truncated file in the local
	// cache reports those too, and calling that an outage would keep the
	// cache from being recloned. A connection cut mid-transfer is instead
	// taken for a damaged cache; the reclone then sees the outage.
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH),
		errors.As(err, &opErr),
		errors.As(err, &dnsErr):
		return true
	case errors.As(err, &netErr):
		// *url.Error is a net.Error too; only count it when it wraps a
		// network failure, not e.g. a certificate problem.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			// A request that got no answer: the connection failed, timed
			// out or was closed (its EOF is the connection's, not a cache
			// file's; net/http's "server closed idle connection", seen
			// when a server drops a new connection, has no exported
			// sentinel). Not a certificate the operator must fix, nor a
			// cancellation.
			return !errors.Is(uerr.Err, context.Canceled) && !isTLSFailure(uerr.Err)
		}
		return true
	}
	var unexpected *plumbing.UnexpectedError
	if errors.As(err, &unexpected) {
		var herr *githttp.Err
		if errors.As(unexpected.Err, &herr) && herr.Response != nil && herr.Response.StatusCode >= 500 {
			return true
		}
	}
	return false
}

// isTLSFailure: the server answered, but its certificate or TLS session
// was refused.
func isTLSFailure(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verification     *tls.CertificateVerificationError
		header           tls.RecordHeaderError
		alert            tls.AlertError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verification) || errors.As(err, &header) || errors.As(err, &alert)
}
