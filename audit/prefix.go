package audit

import (
	"bytes"
	"encoding/hex"
)

// lineHead is what the verifier and a writer's tail read of a line
// without decoding it: every line starts with its seq and prev, then a
// stub's hash or a record's time and kind, always in that order and
// spelling (encodeLine writes them so; parseRecord requires it).
type lineHead struct {
	seq  uint64
	prev [32]byte
	stub bool
	hash [32]byte // a stub's claimed hash
	time []byte   // the time's text, inside the line
	kind []byte   // inside the line
}

var (
	pfxSeq  = []byte(`{"seq":`)
	pfxPrev = []byte(`,"prev":"`)
	pfxHash = []byte(`,"hash":"`)
	pfxTime = []byte(`,"time":"`)
	pfxKind = []byte(`,"kind":"`)
)

// readHead fills h from line (without its newline); false if the line
// does not start as every line of the log does.
func readHead(line []byte, h *lineHead) bool {
	rest, ok := bytes.CutPrefix(line, pfxSeq)
	if !ok {
		return false
	}
	n, i := 0, 0
	h.seq = 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		if n == 20 || (i == 0 && rest[i] == '0' && len(rest) > 1 && rest[1] >= '0' && rest[1] <= '9') {
			return false
		}
		d := uint64(rest[i] - '0')
		if h.seq > (^uint64(0)-d)/10 {
			return false
		}
		h.seq = h.seq*10 + d
		n++
		i++
	}
	if n == 0 {
		return false
	}
	if rest, ok = bytes.CutPrefix(rest[i:], pfxPrev); !ok || !readHex(rest, &h.prev) {
		return false
	}
	rest = rest[65:]
	if r, ok := bytes.CutPrefix(rest, pfxHash); ok {
		h.stub, h.time, h.kind = true, nil, nil
		return readHex(r, &h.hash) && string(r[64:]) == `"}`
	}
	h.stub = false
	if rest, ok = bytes.CutPrefix(rest, pfxTime); !ok {
		return false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return false
	}
	h.time, rest = rest[:end], rest[end+1:]
	if rest, ok = bytes.CutPrefix(rest, pfxKind); !ok {
		return false
	}
	end = bytes.IndexByte(rest, '"')
	if end < 0 || !validKind(Kind(rest[:end])) || end+1 >= len(rest) || (rest[end+1] != ',' && rest[end+1] != '}') {
		return false
	}
	h.kind = rest[:end]
	return true
}

// readHex decodes 64 lower-case hex digits and the closing quote at the
// start of b into out.
func readHex(b []byte, out *[32]byte) bool {
	if len(b) < 65 || b[64] != '"' {
		return false
	}
	for _, c := range b[:64] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	_, err := hex.Decode(out[:], b[:64])
	return err == nil
}

// flatObject reports whether line is one JSON object whose values are
// strings and integers only, as every event's line is (the log's own
// records, which nest, are decoded whole). It is the verifier's check
// that a line is whole JSON, several times cheaper than json.Valid's
// general scanner; whatever it accepts json.Valid accepts (fuzzed).
func flatObject(b []byte) bool {
	if len(b) < 2 || b[0] != '{' {
		return false
	}
	i := 1
	if b[i] == '}' {
		return i+1 == len(b)
	}
	for {
		if i = skipString(b, i); i < 0 || i >= len(b) || b[i] != ':' {
			return false
		}
		i++
		if i < len(b) && b[i] == '"' {
			i = skipString(b, i)
		} else {
			i = skipInteger(b, i)
		}
		if i < 0 || i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return i+1 == len(b)
		default:
			return false
		}
	}
}

// skipString returns the index after the JSON string at b[i], -1 if
// there is none.
func skipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if (h < '0' || h > '9') && (h < 'a' || h > 'f') && (h < 'A' || h > 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// skipInteger returns the index after the JSON integer at b[i], -1 if
// there is none.
func skipInteger(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == start || (b[start] == '0' && i-start > 1) {
		return -1
	}
	return i
}
