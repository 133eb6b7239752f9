package evidence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A frame is one byte of kind, four bytes of payload length (big
// endian), and the payload.
const headerLen = 5

// Requests, supervisor to reader.
const (
	// reqResolve: the payload is a path; the reply is repPath (where it
	// leads, every link resolved) or repErr.
	reqResolve byte = 'r'
	// reqRead: the payload is a 4-byte limit and a resolved path; the
	// reply is repData (at most limit+1 bytes of the file) or repErr.
	reqRead byte = 'g'
)

// Replies, reader to supervisor.
const (
	repPath byte = 'p'
	repData byte = 'd'
	// repErr: the payload is one byte, an error code (codes).
	repErr byte = 'e'
)

// Bounds.
const (
	// MaxPath is the longest path either side accepts (PATH_MAX).
	MaxPath = 4096
	// MaxRead is the largest limit a read may ask for.
	MaxRead = 1 << 20
)

// Errors a Client returns. The reader's own words are never shown: a
// reply is one of these codes.
var (
	// ErrNotFound: nothing is there as the command sees it.
	ErrNotFound = errors.New("evidence: not there as the command sees it")
	// ErrDenied: the command may not read it (file permissions for the
	// command's uid, or Landlock).
	ErrDenied = errors.New("evidence: the command may not read it")
	// ErrNotRegular: not a regular file.
	ErrNotRegular = errors.New("evidence: not a regular file")
	// ErrChanged: a link appeared on a path that had none when it was
	// resolved.
	ErrChanged = errors.New("evidence: the path changed while it was read")
	// ErrInvalid: the path is not absolute and clean, or too long.
	ErrInvalid = errors.New("evidence: not an absolute, clean path")
	// ErrUnreadable: any other failure to read it.
	ErrUnreadable = errors.New("evidence: could not be read")
	// ErrProtocol: the reader sent something it was not asked for; the
	// session is over.
	ErrProtocol = errors.New("evidence: the reader broke the protocol")
)

// codes are the errors' one-byte names on the wire.
func codes() map[byte]error {
	return map[byte]error{
		'n': ErrNotFound, 'a': ErrDenied, 'f': ErrNotRegular, 'c': ErrChanged,
		'i': ErrInvalid, 'o': ErrUnreadable,
	}
}

// codeOf is err's code ('o' for any error that is not one of ours).
func codeOf(err error) byte {
	for c, e := range codes() {
		if errors.Is(err, e) {
			return c
		}
	}
	return 'o'
}

// writeFrame writes one frame whose payload is the parts, joined.
func writeFrame(w io.Writer, kind byte, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	buf := make([]byte, headerLen, headerLen+n)
	buf[0] = kind
	binary.BigEndian.PutUint32(buf[1:], uint32(n))
	for _, p := range parts {
		buf = append(buf, p...)
	}
	_, err := w.Write(buf)
	return err
}

// readFrame reads one frame. max says how long a payload of each kind
// may be; a kind it answers negative for, or a longer payload, is
// refused before anything is allocated. A stream that ends between
// frames is io.EOF; one that ends inside a frame io.ErrUnexpectedEOF.
func readFrame(r io.Reader, max func(kind byte) int) (byte, []byte, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	kind, n := h[0], binary.BigEndian.Uint32(h[1:])
	limit := max(kind)
	if limit < 0 {
		return kind, nil, fmt.Errorf("%w: a frame of kind %q", ErrProtocol, kind)
	}
	if uint64(n) > uint64(limit) {
		return kind, nil, fmt.Errorf("%w: a frame of kind %q of %d bytes (at most %d)", ErrProtocol, kind, n, limit)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return kind, nil, err
	}
	return kind, payload, nil
}

// requestMax bounds the reader's input.
func requestMax(kind byte) int {
	switch kind {
	case reqResolve:
		return MaxPath
	case reqRead:
		return 4 + MaxPath
	}
	return -1
}
