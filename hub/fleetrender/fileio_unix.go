//go:build unix

package fleetrender

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
)

// The no-op re-render reads every generated file and a first render
// creates them all (hundreds of thousands at fleet scale); raw system calls
// skip what os.File adds per file (netpoller registration, fcntl probes),
// which more than halves the system time.

var readBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// sameContent reports whether the regular file at p holds exactly want,
// reading at most len(want)+1 bytes. A symlink, a directory or a missing
// file differs.
func sameContent(p string, want []byte) (bool, error) {
	fd, err := open(p, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	switch err {
	case nil:
	case syscall.ELOOP, syscall.ENOENT, syscall.ENOTDIR:
		return false, nil
	default:
		return false, fmt.Errorf("open %s: %w", p, err)
	}
	defer syscall.Close(fd)
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	if cap(*bp) < len(want)+1 {
		*bp = make([]byte, len(want)+1)
	}
	buf := (*bp)[:len(want)+1]
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EISDIR {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", p, err)
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n == len(want) && bytes.Equal(buf[:n], want), nil
}

// writeAtomic writes data to a temporary file beside dst and renames it
// over dst, so dst is always either the old or the new content.
func writeAtomic(dst string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(dst), tempPrefix+filepath.Base(dst))
	fd, err := open(tmp, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	werr := writeAll(fd, data)
	if cerr := syscall.Close(fd); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = syscall.Rename(tmp, dst)
	}
	if werr != nil {
		syscall.Unlink(tmp)
		return fmt.Errorf("write %s: %w", dst, werr)
	}
	return nil
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := syscall.Write(fd, data)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// mkdir creates one directory whose parent exists; an existing one is fine.
func mkdir(p string) error {
	err := syscall.Mkdir(p, 0o755)
	if err == nil || err == syscall.EEXIST {
		return nil
	}
	return fmt.Errorf("create %s: %w", p, err)
}

func open(p string, flags int, mode uint32) (int, error) {
	for {
		fd, err := syscall.Open(p, flags, mode)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// writeNew writes a file in a directory nobody else sees yet (it is renamed
// into place when complete), so no temporary file is needed.
func writeNew(p string, data []byte) error {
	fd, err := open(p, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	werr := writeAll(fd, data)
	if cerr := syscall.Close(fd); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write %s: %w", p, werr)
	}
	return nil
}
