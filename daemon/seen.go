package daemon

import (
	"slices"
	"sync"

	"github.com/sandboxd/sandboxd/session"
)

// maxSeenSessions bounds the session names remembered for a uid.
const maxSeenSessions = 32

// seenCallers remembers, per uid, the caller its last exec described and
// the named sessions of its recent execs: the approvals page knows a
// person only by uid, and a person's intents live in their state
// directory, per named session (whose files are named by a digest, so
// they cannot be listed back to names).
type seenCallers struct {
	mu sync.Mutex
	m  map[int]*seenCaller
}

type seenCaller struct {
	c        session.Caller
	sessions []string
}

// note remembers c's exec in session name ("": none).
func (s *seenCallers) note(c session.Caller, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[int]*seenCaller{}
	}
	sc := s.m[c.UID]
	if sc == nil {
		sc = &seenCaller{}
		s.m[c.UID] = sc
	}
	sc.c = c
	if name == "" {
		return
	}
	sc.sessions = slices.DeleteFunc(sc.sessions, func(n string) bool { return n == name })
	sc.sessions = append(sc.sessions, name)
	if len(sc.sessions) > maxSeenSessions {
		sc.sessions = sc.sessions[len(sc.sessions)-maxSeenSessions:]
	}
}

// Seen is the caller uid's last exec described and the named sessions of
// its recent execs, newest last; ok is false when uid ran nothing yet.
func (d *Daemon) Seen(uid int) (c session.Caller, sessions []string, ok bool) {
	d.seen.mu.Lock()
	defer d.seen.mu.Unlock()
	sc := d.seen.m[uid]
	if sc == nil {
		return session.Caller{}, nil, false
	}
	return sc.c, slices.Clone(sc.sessions), true
}

// Runner is the runner of every caller's commands.
func (d *Daemon) Runner() *session.Runner { return d.cfg.Runner }
