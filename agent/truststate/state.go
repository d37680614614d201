package truststate

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultName is the state ConfigMap's name.
const DefaultName = "flotilla-agent-state"

// Keys of the ConfigMap's data.
const (
	KeyLastAccepted = "lastAcceptedRevision"
	KeyVerifyAnchor = "verifyAnchor"
)

// ErrCorrupt: the state object holds a value that is not what the agent
// writes. It is never trusted; an operator repairs or deletes the value.
var ErrCorrupt = errors.New("agent state is corrupt")

// ErrUnavailable: the state object could not be read or written.
var ErrUnavailable = errors.New("agent state is unavailable")

// Store reads and writes the state ConfigMap.
type Store struct {
	Client    client.Client
	Namespace string
	// Name of the ConfigMap; DefaultName when empty.
	Name string
	// Branch the accepted revision must be of ("main" when empty).
	Branch string
}

func (s *Store) key() client.ObjectKey {
	name := s.Name
	if name == "" {
		name = DefaultName
	}
	return client.ObjectKey{Namespace: s.Namespace, Name: name}
}

func (s *Store) branch() string {
	if s.Branch == "" {
		return "main"
	}
	return s.Branch
}

// get reads one value: "" when the object or the key is absent.
func (s *Store) get(ctx context.Context, key string) (string, error) {
	cm := &corev1.ConfigMap{}
	if err := s.Client.Get(ctx, s.key(), cm); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("%w: read %s: %w", ErrUnavailable, s.key(), err)
	}
	v, ok := cm.Data[key]
	if !ok {
		if _, bin := cm.BinaryData[key]; bin {
			return "", fmt.Errorf("%w: %s: %s is binary data", ErrCorrupt, s.key(), key)
		}
		return "", nil
	}
	return v, nil
}

// set writes one value, creating the object when absent; a conflict
// (another replica wrote meanwhile) is retried on a fresh read.
func (s *Store) set(ctx context.Context, key, value string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		err := s.Client.Get(ctx, s.key(), cm)
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: s.key().Namespace, Name: s.key().Name,
					Labels: map[string]string{"app.kubernetes.io/name": "flotilla-agent", "app.kubernetes.io/part-of": "flotilla"},
				},
				Data: map[string]string{key: value},
			}
			err = s.Client.Create(ctx, cm)
			if apierrors.IsAlreadyExists(err) {
				// Created by another replica since: read it and update.
				return apierrors.NewConflict(corev1.Resource("configmaps"), s.key().Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if cm.Data[key] == value {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key] = value
		// Update carries the resourceVersion read above: a concurrent
		// write is a conflict, not lost.
		return s.Client.Update(ctx, cm)
	})
	if err != nil {
		return fmt.Errorf("%w: write %s: %w", ErrUnavailable, s.key(), err)
	}
	return nil
}

// LoadAnchor returns strict verification's anchor commit, "" when none was
// recorded (no object, or no such key).
func (s *Store) LoadAnchor(ctx context.Context) (string, error) {
	v, err := s.get(ctx, KeyVerifyAnchor)
	if err != nil || v == "" {
		return "", err
	}
	if !ValidHash(v) {
		return "", fmt.Errorf("%w: %s: %s %q is not a commit hash", ErrCorrupt, s.key(), KeyVerifyAnchor, v)
	}
	return v, nil
}

// StoreAnchor records hash as the anchor.
func (s *Store) StoreAnchor(ctx context.Context, hash string) error {
	if !ValidHash(hash) {
		return fmt.Errorf("anchor %q is not a commit hash", hash)
	}
	return s.set(ctx, KeyVerifyAnchor, hash)
}

// LoadAccepted returns the last accepted revision ("<branch>@sha1:<hash>"),
// "" when none was recorded.
func (s *Store) LoadAccepted(ctx context.Context) (string, error) {
	v, err := s.get(ctx, KeyLastAccepted)
	if err != nil || v == "" {
		return "", err
	}
	hash, ok := strings.CutPrefix(v, s.branch()+"@sha1:")
	if !ok || !ValidHash(hash) {
		return "", fmt.Errorf("%w: %s: %s %q is not a revision of branch %s", ErrCorrupt, s.key(), KeyLastAccepted, v, s.branch())
	}
	return v, nil
}

// SaveAccepted records the last accepted revision.
func (s *Store) SaveAccepted(ctx context.Context, revision string) error {
	return s.set(ctx, KeyLastAccepted, revision)
}

// ValidHash reports whether h is a full SHA-1 or SHA-256 commit hash in
// lower-case hex.
func ValidHash(h string) bool {
	if len(h) != 40 && len(h) != 64 || strings.ToLower(h) != h {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}
