package sandbox

import (
	"slices"
	"syscall"
	"testing"
)

// lookup maps id through m in one direction: inside → host when up is
// false, host → inside when it is true; ok is false for an unmapped id.
func lookup(m []syscall.SysProcIDMap, id int, up bool) (int, bool) {
	for _, e := range m {
		from, to := e.ContainerID, e.HostID
		if up {
			from, to = to, from
		}
		if id >= from && id < from+e.Size {
			return to + id - from, true
		}
	}
	return 0, false
}

// checkMap checks the kernel's rules for a uid_map: at most 340 lines,
// each non-empty and within 0..maxID on both sides, no two overlapping on
// either side.
func checkMap(t *testing.T, m []syscall.SysProcIDMap) {
	t.Helper()
	if len(m) == 0 || len(m) > 340 {
		t.Fatalf("%d lines", len(m))
	}
	for i, a := range m {
		if a.Size < 1 || a.ContainerID < 0 || a.HostID < 0 ||
			a.ContainerID+a.Size-1 > maxID || a.HostID+a.Size-1 > maxID {
			t.Fatalf("line %d out of range: %+v", i, a)
		}
		for _, b := range m[i+1:] {
			if a.ContainerID < b.ContainerID+b.Size && b.ContainerID < a.ContainerID+a.Size {
				t.Fatalf("inside ranges overlap: %+v %+v", a, b)
			}
			if a.HostID < b.HostID+b.Size && b.HostID < a.HostID+a.Size {
				t.Fatalf("host ranges overlap: %+v %+v", a, b)
			}
		}
	}
}

func TestTruthfulUIDMap(t *testing.T) {
	for _, c := range []struct{ host, overflow int }{
		{100000, 65534}, // the default
		{1000, 65534},   // below overflow
		{1, 65534},      // adjacent to 0
		{65533, 65534},  // adjacent to overflow
		{65535, 65534},
		{100000, 1},
		{maxID, 65534}, // the last id
		{100000, maxID},
		{maxID - 1, maxID},
	} {
		m, ok := truthfulUIDMap(c.host, c.overflow)
		if !ok {
			t.Fatalf("%+v: no map", c)
		}
		checkMap(t, m)
		// Exactly host 0 is unmapped; exactly inside overflow is
		// unmapped (so overflow shown inside means host root).
		probes := []int{0, 1, 2, 999, 1000, c.host - 1, c.host, c.host + 1,
			c.overflow - 1, c.overflow, c.overflow + 1, maxID - 1, maxID}
		for _, id := range probes {
			if id < 0 || id > maxID {
				continue
			}
			in, mapped := lookup(m, id, true)
			switch {
			case id == 0:
				if mapped {
					t.Errorf("%+v: host 0 is mapped (to %d)", c, in)
				}
			case !mapped:
				t.Errorf("%+v: host %d is unmapped", c, id)
			case id == c.host && in != 0:
				t.Errorf("%+v: host %d is inside %d, not 0", c, id, in)
			case id == c.overflow && in != c.host:
				t.Errorf("%+v: host overflow is inside %d, not %d", c, in, c.host)
			case id != c.host && id != c.overflow && in != id:
				t.Errorf("%+v: host %d is inside %d", c, id, in)
			}
			if _, mapped := lookup(m, id, false); mapped == (id == c.overflow) {
				t.Errorf("%+v: inside %d mapped: %v", c, id, mapped)
			}
		}
		// Sizes add up to every id but one on each side.
		total := 0
		for _, e := range m {
			total += e.Size
		}
		if total != maxID {
			t.Errorf("%+v: %d ids mapped, want %d", c, total, maxID)
		}
	}
}

func TestTruthfulUIDMapRefuses(t *testing.T) {
	for _, c := range []struct{ host, overflow int }{
		{0, 65534}, {65534, 65534}, {100000, 0}, {-1, 65534}, {100000, -1},
		{maxID + 1, 65534}, {100000, maxID + 1},
	} {
		if m, ok := truthfulUIDMap(c.host, c.overflow); ok {
			t.Errorf("%+v: got %v", c, m)
		}
	}
}

func TestRootUIDMap(t *testing.T) {
	single := []syscall.SysProcIDMap{{ContainerID: 1000, HostID: 100000, Size: 1}}
	if m, sudo := rootUIDMap(1000, 100000); !slices.Equal(m, single) || sudo != -1 {
		t.Errorf("inside uid 1000: %v %d", m, sudo)
	}
	m, sudo := rootUIDMap(0, 100000)
	if o := overflowUID(); o <= 0 {
		t.Skipf("no overflow uid here (%d)", o)
	} else if sudo != o || len(m) < 3 {
		t.Errorf("inside uid 0: %v %d (overflow %d)", m, sudo, o)
	}
}

func TestGitEnv(t *testing.T) {
	h := &helper{sudoUID: 65534}
	in := []string{"PATH=/bin", "SUDO_UID=1000"}
	got := h.gitEnv(in)
	if !slices.Equal(got, []string{"PATH=/bin", "SUDO_UID=65534", "GIT_OPTIONAL_LOCKS=0"}) {
		t.Errorf("got %q", got)
	}
	if !slices.Equal(in, []string{"PATH=/bin", "SUDO_UID=1000"}) {
		t.Errorf("the input changed: %q", in)
	}
	h = &helper{sudoUID: -1}
	got = h.gitEnv([]string{"SUDO_UID=1000", "GIT_OPTIONAL_LOCKS=1"})
	if !slices.Equal(got, []string{"SUDO_UID=1000", "GIT_OPTIONAL_LOCKS=1"}) {
		t.Errorf("got %q", got)
	}
}
