package procmem

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// mapping is one /proc/self/smaps entry of the executable.
type mapping struct {
	start, end uintptr
	perms      string
	rss, anon  int64 // bytes
}

// droppable reports whether the mapping's pages can be dropped and faulted
// back from the file unchanged: private, read-only (text or read-only
// data), and not one page written (a relocated RELRO page is anonymous).
func (m mapping) droppable() bool {
	return (m.perms == "r-xp" || m.perms == "r--p") && m.anon == 0 && m.rss > 0
}

func dropExecutablePages() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("executable: %w", err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("mappings: %w", err)
	}
	maps, err := executableMappings(f, exe)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("mappings: %w", err)
	}
	var dropped int64
	for _, m := range maps {
		if !m.droppable() {
			continue
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED); errno != 0 {
			return dropped, fmt.Errorf("madvise %x-%x: %w", m.start, m.end, errno)
		}
		dropped += m.rss
	}
	return dropped, nil
}

// executableMappings parses smaps (proc(5)) for the mappings of file exe.
func executableMappings(r io.Reader, exe string) ([]mapping, error) {
	var out []mapping
	var cur *mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") {
			// A header: address perms offset dev inode [path].
			cur = nil
			if len(fields) < 6 || strings.Join(fields[5:], " ") != exe {
				continue
			}
			lo, hi, ok := strings.Cut(fields[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil || end <= start {
				return nil, fmt.Errorf("bad mapping %q", fields[0])
			}
			out = append(out, mapping{start: uintptr(start), end: uintptr(end), perms: fields[1]})
			cur = &out[len(out)-1]
			continue
		}
		if cur == nil || len(fields) < 2 {
			continue
		}
		var dst *int64
		switch fields[0] {
		case "Rss:":
			dst = &cur.rss
		case "Anonymous:":
			dst = &cur.anon
		default:
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad %s %q", fields[0], fields[1])
		}
		*dst = kb << 10
	}
	return out, sc.Err()
}
