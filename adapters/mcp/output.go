package mcp

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// Bounded is one output stream of a command, bounded: it keeps the
// first and the last half of its limit and counts every byte, so a
// command that writes gigabytes costs the client a fixed size and still
// shows how it began and how it ended. It is safe for concurrent use.
type Bounded struct {
	mu    sync.Mutex
	half  int
	head  []byte
	tail  []byte // the last bytes after head filled, up to 2*half
	total int64
}

// NewBounded keeps at most limit bytes (at least 2).
func NewBounded(limit int) *Bounded {
	return &Bounded{half: max(limit/2, 1)}
}

// Write keeps what fits; it never fails.
func (b *Bounded) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	q := p
	if n := b.half - len(b.head); n > 0 {
		n = min(n, len(q))
		b.head = append(b.head, q[:n]...)
		q = q[n:]
	}
	if len(q) == 0 {
		return len(p), nil
	}
	if len(q) >= b.half {
		b.tail = append(b.tail[:0], q[len(q)-b.half:]...)
		return len(p), nil
	}
	b.tail = append(b.tail, q...)
	if len(b.tail) > 2*b.half {
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-b.half:]...)
	}
	return len(p), nil
}

// Total is how many bytes were written.
func (b *Bounded) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Truncated reports whether bytes were left out.
func (b *Bounded) Truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total > int64(len(b.head)+min(len(b.tail), b.half))
}

// String is what was kept, as valid UTF-8: the head and, when bytes
// were left out between them, a line saying how many before the tail.
// A character cut at either edge of the gap is dropped.
func (b *Bounded) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tail := b.tail
	if len(tail) > b.half {
		tail = tail[len(tail)-b.half:]
	}
	left := b.total - int64(len(b.head)) - int64(len(tail))
	if left == 0 {
		return strings.ToValidUTF8(string(b.head)+string(tail), "\uFFFD")
	}
	head := string(b.head)
	for i := len(head) - 1; i >= 0 && i >= len(head)-utf8.UTFMax; i-- {
		if utf8.RuneStart(head[i]) {
			if !utf8.FullRuneInString(head[i:]) {
				head = head[:i] // a character cut in two
			}
			break
		}
	}
	t := string(tail)
	for i := 0; i < utf8.UTFMax && t != "" && !utf8.RuneStart(t[0]); i++ {
		t = t[1:]
	}
	left = b.total - int64(len(head)) - int64(len(t))
	return strings.ToValidUTF8(head, "\uFFFD") +
		fmt.Sprintf("\n[sandboxd: %d bytes left out here; %d in all]\n", left, b.total) +
		strings.ToValidUTF8(t, "\uFFFD")
}
