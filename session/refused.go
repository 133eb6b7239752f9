package session

import "github.com/sandboxd/sandboxd/sandbox"

// addRefused adds an attempt's calls refused by design to the run's: one
// entry per class, its count summed over the attempts, in the order the
// classes first came.
func addRefused(run, attempt []sandbox.Refused) []sandbox.Refused {
	for _, r := range attempt {
		found := false
		for i := range run {
			if run[i].Class == r.Class {
				run[i].Count += r.Count
				found = true
				break
			}
		}
		if !found {
			run = append(run, r)
		}
	}
	return run
}

// tellRefused tells the person, once per class, what the run was refused
// by design: the refusal may be why a tool said only "Permission
// denied". A class programs probe and carry on without (netlink: glibc's
// name lookups, getent ahosts, Node.js's lookups of localhost, any
// AI_ADDRCONFIG lookup) is told only when the command failed. The report
// lists every class either way.
func (st *run) tellRefused() {
	for i := range st.rep.Refused {
		r := st.rep.Refused[i]
		if r.Probed && st.rep.ExitCode == 0 {
			continue
		}
		st.ev.Event(Event{Kind: KindRefused, Attempt: st.attempt, Refused: &r})
	}
}
