package mcp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/termfilter"
)

// progress tells a client that asked for it (a progress token) how a
// long call is going: every interval, and at each boundary and retry.
// Notifications go out from one goroutine, in order, so a client that
// reads slowly never holds the run up: a message that finds the queue
// full is dropped (the next tick says as much).
type progress struct {
	msgs chan string
	done chan struct{}
	once sync.Once
}

// startProgress starts the notifications of one call (none when the
// client gave no token).
func startProgress(ctx context.Context, req *sdk.CallToolRequest, every time.Duration, out, errOut *Bounded) *progress {
	p := &progress{msgs: make(chan string, 16), done: make(chan struct{})}
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		close(p.done)
		return p
	}
	start := time.Now()
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		n := 0
		send := func(msg string) {
			n++
			req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: msg})
		}
		for {
			select {
			case <-p.done:
				return
			case <-ctx.Done():
				return
			case m := <-p.msgs:
				send(m)
			case now := <-t.C:
				send(fmt.Sprintf("running for %s; %d bytes of output", now.Sub(start).Round(time.Second), out.Total()+errOut.Total()))
			}
		}
	}()
	return p
}

// say queues one message, or drops it when the queue is full.
func (p *progress) say(msg string) {
	select {
	case <-p.done:
	case p.msgs <- msg:
	default:
	}
}

// stop ends the notifications.
func (p *progress) stop() {
	p.once.Do(func() {
		select {
		case <-p.done:
		default:
			close(p.done)
		}
	})
}

// callEvents passes a run's events to the notes and tells the client of
// boundaries and retries as they happen.
type callEvents struct {
	notes session.Events
	prog  *progress
}

// Event hears one event.
func (e callEvents) Event(ev session.Event) {
	e.notes.Event(ev)
	switch ev.Kind {
	case session.KindBoundary:
		b := ev.Boundary
		word := "denied"
		if b.Decision == broker.Allow {
			word = "allowed"
		}
		// A path or host is the command's choice: escaped, as the notes
		// are, so it cannot start a line that fakes sandboxd's own.
		e.prog.say(fmt.Sprintf("%s %s %s (decided by %s)", word, b.Operation, termfilter.Escape(target(*b)), b.Source))
	case session.KindRetrying:
		e.prog.say("retrying the same command with exactly: " + termfilter.Escape(strings.Join(ev.Exceptions, ", ")))
	}
}

// target is a boundary's path or destination.
func target(b session.Boundary) string {
	if b.Destination != "" {
		return b.Destination
	}
	return b.Path
}
