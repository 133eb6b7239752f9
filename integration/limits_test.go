package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Limits the command runs into are named (stderr and the report: which
// limit, its value, the policy key that raises it), the command is what
// they stop (never sandboxd: no exit 125), and a commit after such an end
// says so and lists the files the command was writing.

// limitOf returns the report's entry for limit name, or nil.
func limitOf(r result, name string) map[string]any {
	ls, _ := r.report["limits"].([]any)
	for _, l := range ls {
		if m, ok := l.(map[string]any); ok && m["limit"] == name {
			return m
		}
	}
	return nil
}

// TestLimitsNamed: a full /tmp, /dev/shm and layer, a pids limit and a
// file-size limit, each named with its value and key; an ordinary run
// names none.
func TestLimitsNamed(t *testing.T) {
	// Serial: its runs fill memory, tmpfs and pids up to their limits; kept apart from other tests' load.
	forEach(t, func(t *testing.T, e *env) {
		pol := writePolicy(t, e, "limits.toml", "[limits]\ntmp_size = \"16MiB\"\nlayer_size = \"16MiB\"\npids = 64\nfile_size = \"12MiB\"\n")
		cases := []struct {
			name, script, limit, key string
			value                    float64
		}{
			{"tmp", "head -c 14000000 /dev/zero > /tmp/a; head -c 14000000 /dev/zero > /tmp/b; echo rc=$?", "tmp", "limits.tmp_size", 16 << 20},
			{"shm", "head -c 14000000 /dev/zero > /dev/shm/a; head -c 14000000 /dev/zero > /dev/shm/b; echo rc=$?", "tmp", "limits.tmp_size", 16 << 20},
			{"layer", "head -c 10000000 /dev/zero > a; head -c 10000000 /dev/zero > b; echo rc=$?", "layer", "limits.layer_size", 16 << 20},
			{"pids", "for i in $(seq 100); do sleep 3 & done 2>/dev/null; wait", "pids", "limits.pids", 64},
			{"file_size", "head -c 13000000 /dev/zero > /tmp/f", "file_size", "limits.file_size", 12 << 20},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := e.sandboxdOpts(runOpts{}, "run", "--policy", pol, "-c", c.script)
				if r.code == 125 {
					t.Fatalf("sandboxd failed (125) at a limit the command hit\n%s", r)
				}
				if c.limit == "pids" && r.report["containment"] == "RLIMIT_NPROC" {
					// No pids cgroup (an unprivileged caller on cgroup
					// v1): the rlimit refuses the fork and leaves no count.
					t.Skip("RLIMIT_NPROC leaves no trace of a refused fork")
				}
				l := limitOf(r, c.limit)
				if l == nil {
					t.Fatalf("the report names no %s limit: %v\n%s", c.limit, r.report["limits"], r)
				}
				if l["key"] != c.key || l["value"] != c.value {
					t.Errorf("limit %v: want key %s, value %v", l, c.key, c.value)
				}
				if !strings.Contains(r.stderr, "raise "+c.key) {
					t.Errorf("stderr does not name %s\n%s", c.key, r)
				}
			})
		}
		t.Run("none", func(t *testing.T) {
			r := e.sandboxdOpts(runOpts{}, "run", "--policy", pol, "-c", "head -c 1000000 /dev/zero > /tmp/a; echo ok > ok").mustSucceed(t)
			if ls, _ := r.report["limits"].([]any); len(ls) != 0 || strings.Contains(r.stderr, "raise limits.") {
				t.Fatalf("limits named on an ordinary run: %v\n%s", ls, r)
			}
		})
	})
}

// TestLimitsMemoryLayer: workspace writes that reach the memory limit (the
// layer is memory) stop the command, not sandboxd: no exit 125, the limit
// is named, and the commit says the attempt ended there and names the
// file that was being written, which is on the host afterwards, cut
// short. An unprivileged caller has no memory group here: its layer is
// held within the memory limit instead.
func TestLimitsMemoryLayer(t *testing.T) {
	// Serial: its run fills memory up to the limit; kept apart from other tests' load.
	forEach(t, func(t *testing.T, e *env) {
		pol := writePolicy(t, e, "memory.toml", "[limits]\nmemory = \"64MiB\"\n")
		r := e.sandboxdOpts(runOpts{}, "run", "--policy", pol, "-c", "head -c 100000000 /dev/zero > big; echo rc=$?")
		if !e.id.root() {
			// No memory cgroup for an unprivileged caller on cgroup v1:
			// the layer (and /tmp, /dev/shm) are held within the limit
			// instead, and the report says what bounds what.
			if r.code == 125 {
				t.Fatalf("sandboxd failed at the limit\n%s", r)
			}
			l := limitOf(r, "layer")
			if l == nil || l["key"] != "limits.memory" || l["value"].(float64) > 64<<20 {
				t.Fatalf("want the layer named, held within limits.memory: %v\n%s", r.report["limits"], r)
			}
			if st, err := os.Stat(filepath.Join(e.ws, "big")); err != nil || st.Size() > 64<<20 {
				t.Errorf("big on the host: %v, size %d", err, sizeOf(st))
			}
			deg, _ := json.Marshal(r.report["degraded"])
			if !strings.Contains(string(deg), "no memory cgroup") || !strings.Contains(string(deg), "together by limits.memory") {
				t.Errorf("the report does not say what bounds memory: %s", deg)
			}
			return
		}
		if r.code == 125 || strings.Contains(r.stderr, "internal error") {
			t.Fatalf("sandboxd failed at the memory limit\n%s", r)
		}
		l := limitOf(r, "memory")
		if l == nil || l["key"] != "limits.memory" || l["value"] != float64(64<<20) {
			t.Fatalf("the report does not name the memory limit: %v\n%s", r.report["limits"], r)
		}
		big := filepath.Join(e.ws, "big")
		if w, _ := l["writing"].([]any); len(w) != 1 || w[0] != big {
			t.Errorf("writing %v, want [%s]", l["writing"], big)
		}
		if !strings.Contains(r.stderr, "raise limits.memory") || !strings.Contains(r.stderr, "ended at a limit (memory)") ||
			!strings.Contains(r.stderr, "may be cut short: big") {
			t.Errorf("stderr does not name the limit and the cut file\n%s", r)
		}
		st, err := os.Stat(big)
		if err != nil || st.Size() >= 100000000 || st.Size() == 0 {
			t.Errorf("big on the host: %v, size %d", err, sizeOf(st))
		}
		if det, _ := r.report["detection"].(map[string]any); det["lost"] != nil {
			t.Errorf("detection lost its end marker at the limit: %v", det)
		}
	})
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return -1
	}
	return st.Size()
}
