package runtext

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/layer"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/termfilter"
)

// Events renders a run's events as the lines `sandboxd run` prints on
// stderr: the sentences an agent reads (golden: testdata/stderr.golden).
// Denials are shown in full up to maxBlocks per attempt; the rest are
// counted by operation and directory and summarised when the attempt's
// review ends (the report keeps every one).
type Events struct {
	w io.Writer
	// mu guards what follows: held connections are decided while the
	// attempt runs, from other goroutines.
	mu      sync.Mutex
	shown   int
	skipped map[string]int // "operation directory" -> count
}

// New renders events onto w.
func New(w io.Writer) *Events { return &Events{w: w} }

// maxBlocks is how many denials an attempt shows in full.
const maxBlocks = 5

// Event renders one event.
func (s *Events) Event(e session.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.w
	switch e.Kind {
	case session.KindBoundary:
		if b := e.Boundary; b.Decision != broker.Allow {
			s.denial(*b)
		}
	case session.KindReviewed:
		s.summary()
	case session.KindPersisted:
		printPersisted(w, e.Workspace, e.Persisted)
	case session.KindRetrying:
		if e.Discarded {
			fmt.Fprintln(w, "sandboxd: the output above is from an attempt whose changes were discarded")
		}
		fmt.Fprintf(w, "sandboxd: retrying the same command with exactly: %s\n", esc(strings.Join(e.Exceptions, ", ")))
	case session.KindHeld:
		fmt.Fprintln(w, "sandboxd: every boundary was allowed; the attempt's changes are held until the retry with its grants (or until they expire)")
	case session.KindNotRetrying:
		fmt.Fprintf(w, "sandboxd: not retrying: %s\n", esc(e.Reason))
	case session.KindTimedOut:
		fmt.Fprintf(w, "sandboxd: timed out after %s; every process of the command was ended\n", esc(e.Reason))
	case session.KindWarning:
		fmt.Fprintf(w, "sandboxd: warning: %s\n", esc(e.Reason))
	case session.KindQuestionWaiting:
		fmt.Fprintf(w, "sandboxd: a question waits for your answer on the approvals page (%s); `sandboxd approve --page` shows its link on your terminal\n", esc(e.Reason))
	case session.KindRefused:
		// Not a boundary: no block, no "decided by", nothing to retry.
		fmt.Fprintf(w, "sandboxd: refused %s: %s; nothing can grant it\n", esc(e.Refused.What), esc(e.Refused.Why))
	case session.KindLimit:
		printLimit(w, *e.Limit)
	case session.KindCommitted:
		printCommit(w, e.Workspace, *e.Commit)
		if len(e.EndedAtLimit) > 0 {
			fmt.Fprintf(w, "sandboxd: the committed attempt ended at a limit (%s)", esc(strings.Join(e.EndedAtLimit, ", ")))
			if len(e.Writing) > 0 {
				fmt.Fprintf(w, "; these files were open for writing then and may be cut short: %s", esc(strings.Join(e.Writing, ", ")))
			}
			fmt.Fprintln(w)
		}
	case session.KindRecovered:
		if r := e.Recovered; r.Err == "" {
			fmt.Fprintf(w, "sandboxd: an interrupted commit to %s was %s\n", esc(r.Workspace), esc(r.Action))
		}
		RecoveryConflicts(w, *e.Recovered)
	}
}

// denial shows one denied boundary, or counts it once maxBlocks were
// shown in this attempt.
func (s *Events) denial(b session.Boundary) {
	if s.shown < maxBlocks {
		s.shown++
		printDenial(s.w, b)
		return
	}
	where := b.Destination
	if b.Path != "" {
		where = filepath.Dir(b.Path) + "/"
	}
	if s.skipped == nil {
		s.skipped = map[string]int{}
	}
	s.skipped[string(b.Operation)+" "+where]++
}

// summary prints the attempt's denials that were not shown, grouped,
// and starts the next attempt's count.
func (s *Events) summary() {
	if len(s.skipped) > 0 {
		keys := make([]string, 0, len(s.skipped))
		total := 0
		for k, n := range s.skipped {
			keys = append(keys, k)
			total += n
		}
		sort.Strings(keys)
		fmt.Fprintf(s.w, "sandboxd: %d more denials not shown here (the report lists each, with why and by whom):\n", total)
		for _, k := range keys {
			fmt.Fprintf(s.w, "  %d× %s\n", s.skipped[k], esc(k))
		}
	}
	s.shown, s.skipped = 0, nil
}

// printDenial tells the agent, in words safe to show a model, what was
// denied, why and by whom, and that another route to it will be denied
// too.
func printDenial(w io.Writer, b session.Boundary) {
	target := b.Path
	if b.Destination != "" {
		target = b.Destination
	}
	fmt.Fprintf(w, "sandboxd: denied %s %s\n  why: %s\n  decided by: %s\n  Retrying the same access another way (another path, tool or command) will be denied too.\n",
		esc(string(b.Operation)), esc(target), esc(b.Rationale), esc(string(b.Source)))
}

// printCommit tells the agent everything the commit did not take as is.
func printCommit(w io.Writer, wsDir string, out layer.Outcome) {
	ws := func(p string) string { return esc(filepath.Join(wsDir, p)) }
	printRefused(w, ws, out.Refused)
	for _, s := range out.Skipped {
		fmt.Fprintf(w, "sandboxd: not committed: %s (%s)\n", ws(s.Path), esc(s.Why))
	}
	for _, c := range out.Conflicts {
		msg := fmt.Sprintf("sandboxd: conflict at %s: %s", ws(c.Path), esc(c.Why))
		if c.SavedAs != "" {
			msg += "; the command's version is saved as " + ws(c.SavedAs)
		}
		fmt.Fprintln(w, msg)
	}
	for _, p := range out.Stripped {
		fmt.Fprintf(w, "sandboxd: committed %s without its setuid/setgid bits\n", ws(p))
	}
	for _, m := range out.Modes {
		fmt.Fprintf(w, "sandboxd: committed %s %s\n", ws(m.Path), esc(m.Why))
	}
	for _, g := range out.Shared {
		fmt.Fprintf(w, "sandboxd: %s is a shared repository (group-writable before the run): the group write of what the command wrote there was kept\n", esc(g))
	}
	var listed []sandbox.Persisted
	for _, li := range out.Listed {
		listed = append(listed, sandbox.Persisted{Path: li.Path, Action: "committed", Why: li.Why})
	}
	printPersisted(w, wsDir, listed)
}

// printLimit names a limit the command ran into, its value and the
// policy key that raises it.
func printLimit(w io.Writer, l sandbox.LimitHit) {
	size := func(n int64) string { return policy.Size(n).String() }
	var what string
	switch l.Limit {
	case "memory":
		what = "reached the memory limit (" + l.Key + " = " + size(l.Value) + ", the layer, /tmp and /dev/shm included) and the kernel killed its processes that asked for more"
	case "pids":
		what = fmt.Sprintf("reached the process limit (%s = %d): a fork or thread failed", l.Key, l.Value)
	case "file_size":
		what = "wrote past the file-size limit (" + l.Key + " = " + size(l.Value) + "): a process was killed by SIGXFSZ"
	case "tmp":
		what = "filled its private /tmp or /dev/shm (" + l.Key + " = " + size(l.Value) + "): writes there failed with ENOSPC"
	case "layer":
		what = "filled the workspace's layer (" + l.Key + " = " + size(l.Value) + "): writes to the workspace failed with ENOSPC"
	default:
		what = "reached " + l.Limit + " (" + l.Key + ")"
	}
	fmt.Fprintf(w, "sandboxd: the command %s; raise %s in your policy's [limits] to allow more\n", what, l.Key)
}

// maxSameWhy is how many paths refused for one reason stderr names one
// by one (a rolled-back submodule is dozens of files); the report has
// them all.
const maxSameWhy = 3

// printRefused shows the refused paths, one block per reason.
func printRefused(w io.Writer, ws func(string) string, refused []layer.Refused) {
	var order []string
	byWhy := map[string][]string{}
	for _, r := range refused {
		if _, ok := byWhy[r.Why]; !ok {
			order = append(order, r.Why)
		}
		byWhy[r.Why] = append(byWhy[r.Why], r.Path)
	}
	for _, why := range order {
		paths := byWhy[why]
		names := make([]string, 0, maxSameWhy)
		for _, p := range paths[:min(len(paths), maxSameWhy)] {
			names = append(names, ws(p))
		}
		list := strings.Join(names, ", ")
		if more := len(paths) - len(names); more > 0 {
			list += fmt.Sprintf(" and %d more (the report's transaction lists them all)", more)
		}
		fmt.Fprintf(w, "sandboxd: not committed: %s\n  why: %s\n  decided by: hard-deny\n  The command's other changes were committed. Writing it another way will be refused too.\n",
			list, esc(why))
	}
}

// maxListed is how many listed paths stderr names one by one; the report
// has them all.
const maxListed = 10

// printPersisted tells the agent what the persistence rules did.
func printPersisted(w io.Writer, ws string, done []sandbox.Persisted) {
	listed := 0
	for _, r := range done {
		path := esc(filepath.Join(ws, r.Path))
		switch r.Action {
		case "quarantined", "removed":
			where := "it was removed"
			if r.Quarantine != "" {
				where = "it was moved to " + esc(r.Quarantine)
			}
			fmt.Fprintf(w, "sandboxd: not kept: %s\n  why: %s\n  decided by: hard-deny\n  %s. Writing it another way will be refused too.\n", path, esc(r.Why), where)
		case "narrowed":
			fmt.Fprintf(w, "sandboxd: %s: %s\n", path, esc(r.Why))
		case "listed", "committed":
			listed++
			if listed <= maxListed {
				fmt.Fprintf(w, "sandboxd: note: the command wrote %s (%s)\n", path, esc(r.Why))
			}
		}
	}
	if listed > maxListed {
		fmt.Fprintf(w, "sandboxd: note: and %d more such files; the report's persistence list names them all\n", listed-maxListed)
	}
}

// RecoveryConflicts names what a recovered commit left alone.
func RecoveryConflicts(w io.Writer, r layer.Recovered) {
	for _, c := range r.Conflicts {
		fmt.Fprintf(w, "  not committed: %s: %s\n", esc(filepath.Join(r.Workspace, c.Path)), esc(c.Why))
	}
}

// esc shows a string that may come from the command (a path, a host, a
// rationale quoting one) without letting it control the terminal.
func esc(s string) string { return termfilter.Escape(s) }
