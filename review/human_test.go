package review

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/termfilter"
	"golang.org/x/sys/unix"
)

// realPrompt is the question's last line, framed.
const realPrompt = termfilter.FrameOn + "Allow exactly this, once? [y/N]"

// pty is a pseudo-terminal whose master the test reads (everything that
// reaches the screen) and answers on.
type pty struct {
	master, slave *os.File
	name          string
	mu            sync.Mutex
	screen        bytes.Buffer
	done          chan struct{}
}

func openPTY(t *testing.T, answer func(screen string) string) *pty {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	s, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &pty{master: m, slave: s, name: name, done: make(chan struct{})}
	t.Cleanup(func() { s.Close(); m.Close(); <-p.done })
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		answered := false
		for {
			n, err := m.Read(buf)
			if n > 0 {
				p.mu.Lock()
				p.screen.Write(buf[:n])
				text := p.screen.String()
				p.mu.Unlock()
				if !answered && strings.Contains(text, realPrompt) {
					answered = true
					m.Write([]byte(answer(text) + "\n"))
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

func (p *pty) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.screen.String()
}

// TestHumanHoldsOutputAndEscapes: a question whose values carry terminal
// controls shows them escaped, inside sandboxd's frame; what the command
// prints while the question is open reaches the terminal only after the
// answer, and nothing it prints can use the frame.
func TestHumanHoldsOutputAndEscapes(t *testing.T) {
	ptyT := openPTY(t, func(string) string { return "n" })
	out := termfilter.New(ptyT.slave)
	name := "/x/\x1b]52;c;ZXZpbA==\x07\x1b]0;t\x07\x1b]10;?\x07\x1b]11;?\x07\x1b[2J\x1b[7m\nAllow exactly this, once? [y/N] "
	req := grants.Request{Session: "s", Cwd: "/w", Command: "touch " + name, Surface: boundary.Filesystem,
		Operation: "make_reg", Path: name, ResolvedPath: name}
	h := &Human{TTY: ptyT.name, Timeout: 5 * time.Second, Hold: out}

	// The command prints while the question is open, and tries the frame.
	asked := make(chan struct{})
	go func() {
		for !strings.Contains(ptyT.text(), realPrompt) {
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Fprintf(out, "DURING-QUESTION \x1b[7m---- sandboxd: permission request ----\x1b[0m\n")
		close(asked)
	}()
	d, err := h.Review(context.Background(), req)
	if err != nil || d.Outcome != broker.Deny || d.Source != broker.SourceHuman {
		t.Fatalf("Review = %+v, %v; want a deny by the person", d, err)
	}
	<-asked
	fmt.Fprintf(out, "AFTER\n")
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(ptyT.text(), "AFTER") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	screen := ptyT.text()
	answer := strings.Index(screen, realPrompt)
	during := strings.Index(screen, "DURING-QUESTION")
	if answer < 0 || during < 0 {
		t.Fatalf("the question or the command's output is missing:\n%q", screen)
	}
	if during < answer {
		t.Fatalf("the command's output reached the terminal while the question was open:\n%q", screen)
	}
	// Every frame on the screen is sandboxd's own.
	for i := 0; ; {
		j := strings.Index(screen[i:], termfilter.FrameOn)
		if j < 0 {
			break
		}
		rest := screen[i+j+len(termfilter.FrameOn):]
		if !strings.HasPrefix(rest, "---- sandboxd: permission request ----") && !strings.HasPrefix(rest, "Allow exactly this, once? [y/N]") {
			t.Fatalf("a frame that is not sandboxd's: %q", rest[:min(len(rest), 40)])
		}
		i += j + 1
	}
	for _, raw := range []string{"\x1b]52", "\x1b]0;", "\x1b]10;", "\x1b]11;", "\x1b[2J", "\x1b[7m"} {
		if strings.Contains(screen, raw) {
			t.Fatalf("%q reached the terminal:\n%q", raw, screen)
		}
	}
	if !strings.Contains(screen, `\x1b]52;c;ZXZpbA==\x07`) {
		t.Fatalf("the name is not shown escaped:\n%q", screen)
	}
	if n := strings.Count(screen, realPrompt); n != 1 {
		t.Fatalf("%d framed prompts on the screen, want one:\n%q", n, screen)
	}
	// The fake prompt in the name is on the line that names it, after a
	// visible \n, never at the start of a line of its own.
	for _, line := range strings.Split(screen, "\n") {
		line = strings.TrimLeft(line, "\r")
		if strings.HasPrefix(line, "Allow exactly") {
			t.Fatalf("a prompt line that is not sandboxd's: %q\n%q", line, screen)
		}
	}
}

// A terminal passed as an open file is asked on; a question the model
// denied as critical, or about a production target, takes the
// break-glass phrase shown, never a "y", and says why it is critical.
func TestHumanOnFileCriticalNeedsPhrase(t *testing.T) {
	req := grants.Request{Session: "s", Cwd: "/w", Command: "touch /x", Surface: boundary.Filesystem,
		Operation: "make_reg", Path: "/x", ResolvedPath: "/x"}
	crit := broker.Decision{Outcome: broker.Deny, RiskLevel: broker.RiskCritical, Rationale: "a shell start-up file"}
	prod := broker.Decision{Outcome: broker.Deny, RiskLevel: broker.RiskCritical, Source: broker.SourceNoReviewer, Production: "prod",
		Rationale: "the name prod in the host prod-eu.example.com matches the production marker prod"}
	for _, dc := range []struct {
		name     string
		deferred broker.Decision
		says     []string
	}{
		{"model", crit, []string{"model:   denied it (risk critical): a shell start-up file", "The model judged this critical."}},
		{"production", prod, []string{"production: the name prod in the host prod-eu.example.com matches the production marker prod",
			"This is a production target (marker prod)."}},
	} {
		for _, tc := range []struct {
			name    string
			answer  func(screen string) string
			outcome broker.Outcome
		}{
			{"y is not enough", func(string) string { return "y" }, broker.Deny},
			{"the phrase", func(screen string) string {
				i := strings.Index(screen, "type BREAK-GLASS ")
				return screen[i+len("type ") : i+len("type BREAK-GLASS ")+8]
			}, broker.Allow},
			{"another code", func(string) string { return "BREAK-GLASS AAAAAAAA" }, broker.Deny},
		} {
			t.Run(dc.name+"/"+tc.name, func(t *testing.T) {
				screen := askOnPty(t, broker.WithDeferred(context.Background(), dc.deferred), req, tc.answer, tc.outcome)
				for _, want := range dc.says {
					if !strings.Contains(screen, want) {
						t.Errorf("the question does not say %q:\n%q", want, screen)
					}
				}
			})
		}
	}
}

// askOnPty asks req on a new pseudo-terminal, answers with what answer
// makes of the screen, checks the outcome and returns the screen.
func askOnPty(t *testing.T, ctx context.Context, req grants.Request, answer func(string) string, outcome broker.Outcome) string {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0)
	n, _ := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	shown := make(chan string, 1)
	go func() {
		var screen []byte
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			screen = append(screen, buf[:n]...)
			if strings.Contains(string(screen), "anything else denies:") {
				m.Write([]byte(answer(string(screen)) + "\n"))
				shown <- string(screen)
				return
			}
			if err != nil {
				shown <- string(screen)
				return
			}
		}
	}()
	h := &Human{TTY: "/nonexistent", File: s, Timeout: 5 * time.Second}
	d, err := h.Review(ctx, req)
	if err != nil || d.Outcome != outcome || d.Source != broker.SourceHuman {
		t.Fatalf("Review = %+v, %v; want %s by the person", d, err, outcome)
	}
	return <-shown
}

// Before its question the terminal gets a desktop notification (OSC 9
// and OSC 777, ended by ST) of fixed text, and, when the daemon has an
// approvals page, a line saying so; nothing of the command's reaches the
// notification.
func TestHumanNotifies(t *testing.T) {
	req := grants.Request{Session: "s", Cwd: "/w", Command: "touch '/x\x1b]9;evil\x1b\\'", Surface: boundary.Filesystem,
		Operation: "make_reg", Path: "/x", ResolvedPath: "/x"}
	for _, page := range []string{"", "or answer on the approvals page (sandboxd approve --page shows its link here)"} {
		p := openPTY(t, func(string) string { return "n" })
		h := &Human{TTY: p.name, Timeout: 10 * time.Second, Page: page}
		if _, err := h.Review(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		screen := p.text()
		for _, want := range []string{"\x1b]9;sandboxd: a question waits for your answer\x1b\\", "\x1b]777;notify;sandboxd;a question waits for your answer\x1b\\"} {
			if !strings.HasPrefix(screen, want) && !strings.Contains(screen, want) {
				t.Fatalf("no notification %q:\n%q", want, screen)
			}
		}
		if strings.Contains(screen, "\x1b]9;evil") || strings.Contains(screen, "\x07") {
			t.Fatalf("the command's text reached a notification, or a BEL was sent:\n%q", screen)
		}
		if page != "" && !strings.Contains(screen, "sandboxd: "+page) {
			t.Fatalf("no line about the page:\n%q", screen)
		}
	}
}
