package gitrepo

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
)

// DefaultMaxFetchSize bounds the pack one fetch may download when
// Source.MaxFetchSize is zero: far above a rendered fleet repo with vendored
// charts, far below what would fill an edge node's disk or memory.
const DefaultMaxFetchSize int64 = 512 << 20

// maxFetchSize is the effective limit of a configured one: zero is the
// default, negative is none.
func maxFetchSize(configured int64) int64 {
	switch {
	case configured == 0:
		return DefaultMaxFetchSize
	case configured < 0:
		return 0
	}
	return configured
}

// limitedStorer is a Storer whose PackfileWriter fails with ErrTooLarge once
// more than max bytes were written to it. go-git streams a fetched pack
// straight into that writer (to a temporary file), so the fetch stops
// reading from the remote at the limit instead of downloading the rest.
type limitedStorer struct {
	storage.Storer
	pw  storer.PackfileWriter
	max int64
}

// limitFetch wraps st when it writes packs and max is positive; otherwise
// it returns st unchanged.
func limitFetch(st storage.Storer, max int64) storage.Storer {
	pw, ok := st.(storer.PackfileWriter)
	if !ok || max <= 0 {
		return st
	}
	return &limitedStorer{Storer: st, pw: pw, max: max}
}

func (s *limitedStorer) PackfileWriter() (io.WriteCloser, error) {
	w, err := s.pw.PackfileWriter()
	if err != nil {
		return nil, err
	}
	return &limitedWriter{w: w, left: s.max, max: s.max}, nil
}

type limitedWriter struct {
	w    io.WriteCloser
	left int64
	max  int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		n, _ := l.w.Write(p[:l.left])
		l.left -= int64(n)
		return n, fmt.Errorf("%w: the pack is larger than %d bytes", ErrTooLarge, l.max)
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	return n, err
}

func (l *limitedWriter) Close() error { return l.w.Close() }

// removeTempPacks deletes the temporary pack files an aborted fetch leaves
// in a filesystem cache (go-git keeps them when the pack does not parse),
// so that repeated attempts do not fill the disk.
func removeTempPacks(repoDir string) {
	tmps, _ := filepath.Glob(filepath.Join(repoDir, "objects", "pack", "tmp_pack_*"))
	for _, f := range tmps {
		_ = os.Remove(f)
	}
}
