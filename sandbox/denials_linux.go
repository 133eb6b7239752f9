package sandbox

import (
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/sandbox/detect"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
)

// collectDenials gathers the run's denials from the audit detector and
// the observer, judged by package detect, and names each object by what
// is there now.
func (r *run) collectDenials() {
	res, h := &r.res, r.h
	if r.det != nil {
		res.Denials, res.Detection = r.det.Collect(time.Second)
		if h.neverRan && res.Detection.Lost == -1 {
			// The helper could not start the command (126, 127), maybe
			// before it confined itself: no domain, and nothing lost.
			res.Detection.Lost, res.Detection.Why = 0, "the command never started"
		}
	}
	if h.obs != nil && r.spec.NoDetect {
		h.obs.Finish() // nothing was observed
	} else if h.obs != nil {
		judge := r.judge()
		intents := h.obs.Finish()
		res.Denials = detect.Merge(res.Denials, judge.Refused(intents))
		res.Refused = h.obs.Refusals()
		if note := r.foreignGroupNote(intents); note != "" {
			res.Warnings = append(res.Warnings, note)
		}
		if res.Detection.Detector == "none" {
			res.Detection = Detection{Detector: "seccomp", Why: "no kernel audit (" + res.Detection.Why + "): every open is observed and denied reads are judged from sandboxd's copy of the policy, which matches Landlock's carve-out but may differ where file permissions deny first"}
		} else {
			res.Detection.Detector += "+seccomp"
		}
	}
	// Name each object by what is there now (inode and birth time): the
	// identity a grant binds to, checked again before a retry.
	for i, d := range res.Denials {
		if d.Surface != "filesystem" {
			continue
		}
		if ino, born, _, ok := Identity(d.Path); ok {
			res.Denials[i].Ino, res.Denials[i].Born = ino, born
		} else {
			res.Denials[i].Ino, res.Denials[i].Born = 0, 0
		}
	}
}

// judge is the run's policy as package detect judges observed calls by
// it.
func (r *run) judge() detect.Policy {
	spec := &r.spec
	writable := r.writableRoots()
	var readable []string
	if r.wantNS {
		// The helper's own rules (wire.OwnRoots: its /tmp is bound on
		// /var/tmp too).
		writable = append(append(writable, wire.OwnRoots()...), "/var/tmp")
		for _, name := range wire.DevNodes() {
			writable = append(writable, "/dev/"+name)
		}
		readable = wire.OwnReadable()
	} else {
		writable = append(writable, r.setup.TmpDir)
		for _, name := range wire.HostDevNodes() {
			writable = append(writable, "/dev/"+name)
		}
	}
	var readOnly, pinned []string
	if p := r.prepared(); p.plan != nil && r.wantNS && !r.txn {
		for _, rel := range p.plan.ReadOnly() {
			readOnly = append(readOnly, filepath.Join(spec.Workspace, rel))
		}
		for _, rel := range p.plan.Pins() {
			pinned = append(pinned, filepath.Join(spec.Workspace, rel))
		}
	}
	var granted []detect.Grant
	for _, e := range spec.Exceptions {
		granted = append(granted, detect.Grant{Operation: e.Operation, Path: e.Path})
	}
	for _, o := range r.opened {
		if o.source != "" { // a copy: its path reads
			granted = append(granted, detect.Grant{Operation: o.Operation, Path: o.Path})
		}
	}
	return detect.Policy{Writable: writable, ReadOnly: readOnly, Pinned: pinned, Granted: granted,
		ReadsObserved: r.det == nil, Reads: r.reads, Readable: readable, NetNS: r.wantNS, Captured: r.captured()}
}
