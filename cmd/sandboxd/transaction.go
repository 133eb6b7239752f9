package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/layer"
	"github.com/sandboxd/sandboxd/sandbox"
	"golang.org/x/sys/unix"
)

// crashEnv names a failpoint for crash tests: sandboxd kills itself with
// SIGKILL at that point of a commit (see layer.Options.CrashAt).
const crashEnv = "SANDBOXD_TEST_CRASH_AT"

// txnReport is the report's "transaction" object.
type txnReport struct {
	// Mode is "layer" (writes held in a copy-on-write layer, the final
	// attempt's committed) or "none" (written straight through).
	Mode      string `json:"mode"`
	Why       string `json:"why,omitempty"`
	LayerSize int64  `json:"layer_size,omitempty"`
	// Discarded counts attempts whose layer was dropped for a retry.
	Discarded int               `json:"discarded_attempts"`
	Committed *layer.Outcome    `json:"committed,omitempty"`
	Recovered []layer.Recovered `json:"recovered,omitempty"`
}

// commitLayer commits the final attempt's layer into the workspace and
// tells the agent, on stderr, everything that was not committed as is.
func commitLayer(ctx context.Context, l *sandbox.Layer, spec *sandbox.Spec, env hostEnv, getenv func(string) string, stderr io.Writer, log *slog.Logger) (layer.Outcome, error) {
	defer l.Close()
	fd, err := unix.Openat(int(l.Root.Fd()), "upper", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		// The command locked the workspace's root in its layer (the root's
		// own mode is never committed); the layer is ours to open.
		var st unix.Stat_t
		if unix.Fstatat(int(l.Root.Fd()), "upper", &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			unix.Fchmodat(int(l.Root.Fd()), "upper", st.Mode&0o7777|0o700, 0)
		}
		fd, err = unix.Openat(int(l.Root.Fd()), "upper", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return layer.Outcome{}, fmt.Errorf("commit: open the layer: %w", err)
	}
	upper := os.NewFile(uintptr(fd), "upper")
	defer upper.Close()
	out, err := layer.Commit(ctx, layer.Source{Upper: upper, Started: l.Started,
		HostUID: l.HostUID, HostGID: l.HostGID, UID: l.UID, GID: l.GID},
		layer.Options{Workspace: spec.Workspace, StateDir: spec.StateDir, RunID: newID(),
			Protected: spec.Protected, Unguarded: append(append([]string(nil), spec.Writable...), spec.Caches...),
			Home: spec.Home, GitConfigs: spec.GitConfigs, Umask: env.umask,
			Log: log, CrashAt: getenv(crashEnv)})
	ws := func(p string) string { return esc(filepath.Join(spec.Workspace, p)) }
	for _, r := range out.Refused {
		fmt.Fprintf(stderr, "sandboxd: not committed: %s\n  why: %s\n  decided by: hard-deny\n  The command's other changes were committed. Writing it another way will be refused too.\n",
			ws(r.Path), esc(r.Why))
	}
	for _, s := range out.Skipped {
		fmt.Fprintf(stderr, "sandboxd: not committed: %s (%s)\n", ws(s.Path), esc(s.Why))
	}
	for _, c := range out.Conflicts {
		msg := fmt.Sprintf("sandboxd: conflict at %s: %s", ws(c.Path), esc(c.Why))
		if c.SavedAs != "" {
			msg += "; the command's version is saved as " + ws(c.SavedAs)
		}
		fmt.Fprintln(stderr, msg)
	}
	for _, p := range out.Stripped {
		fmt.Fprintf(stderr, "sandboxd: committed %s without its setuid/setgid bits\n", ws(p))
	}
	for _, m := range out.Modes {
		fmt.Fprintf(stderr, "sandboxd: committed %s %s\n", ws(m.Path), esc(m.Why))
	}
	for _, g := range out.Shared {
		fmt.Fprintf(stderr, "sandboxd: %s is a shared repository (group-writable before the run): the group write of what the command wrote there was kept\n", esc(g))
	}
	var listed []sandbox.Persisted
	for _, li := range out.Listed {
		listed = append(listed, sandbox.Persisted{Path: li.Path, Action: "committed", Why: li.Why})
	}
	printPersisted(stderr, spec.Workspace, listed)
	if err != nil {
		return out, fmt.Errorf("commit: %w (the workspace is untouched or, after `sandboxd recover`, fully committed)", err)
	}
	return out, nil
}

// recoverCommits finishes or rolls back commits interrupted by a crash.
func recoverCommits(stateDir string, stderr io.Writer, log *slog.Logger) []layer.Recovered {
	rec, err := layer.Recover(stateDir, log)
	for _, r := range rec {
		if r.Err == "" {
			fmt.Fprintf(stderr, "sandboxd: an interrupted commit to %s was %s\n", esc(r.Workspace), esc(r.Action))
		}
		printRecoveryConflicts(stderr, r)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: recovery: %s\n", esc(err.Error()))
	}
	return rec
}

// recoverCommand is `sandboxd recover [--json]`.
func recoverCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	asJSON := len(args) == 1 && args[0] == "--json"
	if len(args) > 0 && !asJSON {
		fmt.Fprintln(stderr, "Usage: sandboxd recover [--json]")
		return exitSandboxd
	}
	env, err := loadEnv(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(err.Error()))
		return exitSandboxd
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rec, err := layer.Recover(filepath.Join(env.stateBase, "sandboxd"), log)
	if asJSON {
		b, _ := json.MarshalIndent(struct {
			Recovered []layer.Recovered `json:"recovered"`
		}{append([]layer.Recovered{}, rec...)}, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		for _, r := range rec {
			fmt.Fprintf(stdout, "%s: commit %s %s (%d ops)\n", esc(r.Workspace), esc(r.RunID), esc(r.Action), r.Ops)
			printRecoveryConflicts(stdout, r)
		}
		if len(rec) == 0 {
			fmt.Fprintln(stdout, "nothing to recover")
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: recover: %s\n", esc(err.Error()))
		return 1
	}
	return 0
}

// printRecoveryConflicts names what a recovered commit left alone.
func printRecoveryConflicts(w io.Writer, r layer.Recovered) {
	for _, c := range r.Conflicts {
		fmt.Fprintf(w, "  not committed: %s: %s\n", esc(filepath.Join(r.Workspace, c.Path)), esc(c.Why))
	}
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
