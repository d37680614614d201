package render

import (
	"context"
	"slices"

	"github.com/flotilla-gitops/flotilla/pkg/render/sopsdecrypt"
)

// Decryptor decrypts the SOPS documents a unit reads. Only the agent sets
// one (Options.Decryptor), with its cluster's age identity; sopsdecrypt's
// Keyring is the implementation.
type Decryptor interface {
	Decrypt(ctx context.Context, doc *sopsdecrypt.Document) ([]byte, error)
}

// sopsContent is what krusty (and the chart loader) see of a file read
// from the repository: the file itself, or, for a SOPS document, its
// plaintext (with a Decryptor) or its redacted form (without: the hub,
// which never holds a key). A SOPS document's format is chosen by its
// extension, as sops does; so a dotenv or binary file used by a
// secretGenerator decrypts like a manifest. Plaintext lives only in
// memory, for this render.
func (f *confinedFS) sopsContent(rel string, data []byte) ([]byte, error) {
	doc, err := sopsdecrypt.Parse(sopsdecrypt.FormatForPath(rel), data)
	if err != nil {
		return nil, f.note(errFileCause(rel, ErrDecrypt, err.Error(), err))
	}
	if doc == nil {
		return data, nil
	}
	f.mu.Lock()
	out, ok := f.sopsDone[rel]
	if !ok && !slices.Contains(f.sopsFiles, rel) {
		f.sopsFiles = append(f.sopsFiles, rel)
	}
	f.mu.Unlock()
	if ok {
		return out, nil // krusty reads some files more than once
	}
	if f.decryptor == nil {
		out, err = doc.Redacted()
	} else {
		out, err = f.decryptor.Decrypt(f.ctx, doc)
	}
	if err != nil {
		return nil, f.note(errFileCause(rel, ErrDecrypt, err.Error(), err))
	}
	f.mu.Lock()
	f.sopsDone[rel] = out
	f.mu.Unlock()
	return out, nil
}

// encryptedFiles are the SOPS documents the render read, sorted.
func (f *confinedFS) encryptedFiles() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.sopsFiles)
	slices.Sort(out)
	return out
}
