package procmem

import (
	"os"
	"strings"
	"testing"
)

const smapsSample = `00400000-012a4000 r--p 00000000 103:01 4718 /bin/agent
Size:              15000 kB
Rss:                1200 kB
Anonymous:             0 kB
012a4000-0307a000 r-xp 00ea4000 103:01 4718 /bin/agent
Rss:               20000 kB
Anonymous:             0 kB
051a2000-051a3000 r--p 04da1000 103:01 4718 /bin/agent
Rss:                   4 kB
Anonymous:             4 kB
051a3000-05290000 rw-p 04da2000 103:01 4718 /bin/agent
Rss:                 600 kB
Anonymous:           200 kB
05290000-07400000 rw-p 00000000 00:00 0
Rss:                9000 kB
Anonymous:          9000 kB
7f0000000000-7f0000001000 r-xp 00000000 103:01 99 /lib/other.so
Rss:                   4 kB
Anonymous:             0 kB
7f0000002000-7f0000003000 r--p 00000000 103:01 5 /bin/agent (copy)
Rss:                   4 kB
Anonymous:             0 kB
`

func TestExecutableMappings(t *testing.T) {
	maps, err := executableMappings(strings.NewReader(smapsSample), "/bin/agent")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		start     uintptr
		perms     string
		rss, anon int64
		droppable bool
	}{
		{start: 0x400000, perms: "r--p", rss: 1200 << 10, droppable: true},   // read-only data
		{start: 0x12a4000, perms: "r-xp", rss: 20000 << 10, droppable: true}, // text
		{start: 0x51a2000, perms: "r--p", rss: 4 << 10, anon: 4 << 10},       // RELRO: written before made read-only
		{start: 0x51a3000, perms: "rw-p", rss: 600 << 10, anon: 200 << 10},   // data
	} {
		var m *mapping
		for i := range maps {
			if maps[i].start == tc.start {
				m = &maps[i]
			}
		}
		if m == nil {
			t.Errorf("no mapping at %#x in %+v", tc.start, maps)
			continue
		}
		if m.perms != tc.perms || m.rss != tc.rss || m.anon != tc.anon || m.droppable() != tc.droppable {
			t.Errorf("mapping %#x: %+v droppable %v; want perms %s rss %d anon %d droppable %v", tc.start, *m, m.droppable(), tc.perms, tc.rss, tc.anon, tc.droppable)
		}
	}
	if len(maps) != 4 {
		t.Errorf("%d mappings of /bin/agent, want 4 (not other files, not anonymous ones): %+v", len(maps), maps)
	}
	if _, err := executableMappings(strings.NewReader("zz-yy r--p 0 0:0 1 /bin/agent\n"), "/bin/agent"); err == nil {
		t.Error("bad address range accepted")
	}
}

// TestRelease drops this test binary's own text and read-only data pages;
// the test goes on running (faulting back what it runs), and so does the
// runtime, which walks its tables in those pages.
func TestRelease(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skip(err)
	}
	r, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if r.ExecutableBytes <= 0 {
		t.Errorf("released %d bytes of %s's pages, want some (the test binary's code is resident)", r.ExecutableBytes, exe)
	}
	// Still runs: the garbage collector and a second release work.
	_ = make([]byte, 1<<20)
	if _, err := Release(); err != nil {
		t.Fatal(err)
	}
}
