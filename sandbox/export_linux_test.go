package sandbox

import (
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// AddFailingCapture puts in p, as ready for the launch of spec (in
// namespaces, for a caller other than root, whose helper's capabilities
// are its ambient ones), a helper started without CAP_NET_BIND_SERVICE:
// its stub resolver cannot bind port 53, so the capture it prepares
// fails.
func AddFailingCapture(p *ReadyHelpers, spec Spec) error {
	l := newLaunch(spec, true, false)
	key := l.key()
	attr := *l.attr
	attr.AmbientCaps = slices.DeleteFunc(slices.Clone(attr.AmbientCaps), func(c uintptr) bool { return c == unix.CAP_NET_BIND_SERVICE })
	l.attr = &attr
	h, err := spawnHelper(l)
	if err != nil {
		return err
	}
	rh := &readyHelper{h: h}
	rh.timer = time.AfterFunc(time.Hour, func() { p.expire(key, rh) })
	p.mu.Lock()
	p.ready[key] = append(p.ready[key], rh)
	p.n++
	p.mu.Unlock()
	return nil
}
