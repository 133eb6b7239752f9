package daemon

import "sync"

// cond is l's condition on mu, made on first use.
func (l *lineWriter) condLocked() *sync.Cond {
	if l.holdCond == nil {
		l.holdCond = sync.NewCond(&l.mu)
	}
	return l.holdCond
}

// Hold holds the command's output lines back (a question is open):
// nothing it prints lands between the question and its answer. The
// command waits on its full pipe meanwhile.
func (l *lineWriter) Hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held++
}

// Release lets the output go once no question is open.
func (l *lineWriter) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held--; l.held <= 0 {
		l.held = 0
		l.condLocked().Broadcast()
	}
}

// end frees held output for good: the run is over.
func (l *lineWriter) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	l.condLocked().Broadcast()
}

// waitHeld waits while a question is open.
func (l *lineWriter) waitHeld() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.held > 0 && !l.ended && !l.failed {
		l.condLocked().Wait()
	}
}
