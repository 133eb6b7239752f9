package landlock

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Audit record types the kernel emits for Landlock (ABI 7+).
const (
	AuditAccess = 1423 // AUDIT_LANDLOCK_ACCESS: one denied access
	AuditDomain = 1424 // AUDIT_LANDLOCK_DOMAIN: a domain allocated or freed
)

// Record is one parsed Landlock audit record. Which fields are set
// depends on Type and, for access records, on the blocker.
type Record struct {
	Type   int    // AuditAccess or AuditDomain
	Serial uint64 // the audit event serial (records of one event share it)
	Domain string // Landlock domain id, hex as the kernel prints it

	// Access records.
	Blockers []string // e.g. "fs.write_file", "net.connect_tcp", "scope.signal"
	Path     string   // decoded (the kernel hex-encodes unusual paths)
	Dev      string
	Ino      uint64
	Daddr    string // net.*: destination address
	Dest     int    // net.*: destination port
	Opid     int    // scope.*: the target process
	Ocomm    string

	// Domain records.
	Status  string // "allocated" or "deallocated"
	Denials uint64 // with "deallocated": how many denials the domain logged
	Pid     int    // with "allocated": the process that created the domain
}

// ErrNotLandlock is returned for records of other types.
var ErrNotLandlock = errors.New("landlock: not a Landlock audit record")

// ParseRecord parses the text of an audit record of the given type, as
// read from NETLINK_AUDIT: `audit(SEC.MSEC:SERIAL): key=value ...`.
// Values are either "quoted" or, when the kernel judged them unsafe
// (spaces, quotes, control or non-ASCII bytes), hex-encoded without
// quotes; ParseRecord decodes both. Unknown keys are ignored, so new
// kernel fields do not break parsing.
func ParseRecord(typ int, text string) (Record, error) {
	if typ != AuditAccess && typ != AuditDomain {
		return Record{}, ErrNotLandlock
	}
	r := Record{Type: typ}
	rest, ok := strings.CutPrefix(text, "audit(")
	if !ok {
		return r, fmt.Errorf("landlock: audit record without a header: %.40q", text)
	}
	head, rest, ok := strings.Cut(rest, "):")
	if !ok {
		return r, fmt.Errorf("landlock: audit record header not closed: %.40q", text)
	}
	_, serial, ok := strings.Cut(head, ":")
	if !ok {
		return r, fmt.Errorf("landlock: audit record header without a serial: %.40q", text)
	}
	var err error
	if r.Serial, err = strconv.ParseUint(serial, 10, 64); err != nil {
		return r, fmt.Errorf("landlock: audit serial %q: %w", serial, err)
	}
	fields, err := splitFields(rest)
	if err != nil {
		return r, err
	}
	for _, f := range fields {
		key, raw, quoted := f.key, f.value, f.quoted
		switch key {
		case "domain":
			r.Domain = raw
		case "blockers":
			r.Blockers = strings.Split(raw, ",")
		case "path":
			if r.Path, err = untrusted(raw, quoted); err != nil {
				return r, fmt.Errorf("landlock: path: %w", err)
			}
		case "dev":
			r.Dev, _ = untrusted(raw, quoted)
		case "ino":
			r.Ino, _ = strconv.ParseUint(raw, 10, 64)
		case "daddr":
			r.Daddr = raw
		case "dest":
			r.Dest, _ = strconv.Atoi(raw)
		case "opid":
			r.Opid, _ = strconv.Atoi(raw)
		case "ocomm":
			r.Ocomm, _ = untrusted(raw, quoted)
		case "status":
			r.Status = raw
		case "denials":
			r.Denials, _ = strconv.ParseUint(raw, 10, 64)
		case "pid":
			r.Pid, _ = strconv.Atoi(raw)
		}
	}
	if r.Domain == "" {
		return r, errors.New("landlock: audit record without a domain")
	}
	if typ == AuditAccess && len(r.Blockers) == 0 {
		return r, errors.New("landlock: access record without blockers")
	}
	return r, nil
}

type field struct {
	key, value string
	quoted     bool
}

// splitFields splits `k=v k="v w" k=HEX` into fields. A quoted value runs
// to the next double quote (the kernel never puts one inside: such a
// string is hex-encoded instead).
func splitFields(s string) ([]field, error) {
	var out []field
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			return out, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("landlock: audit field without a key: %.40q", s)
		}
		key := s[:eq]
		if strings.ContainsAny(key, " \"") {
			return nil, fmt.Errorf("landlock: bad audit field name %.40q", key)
		}
		s = s[eq+1:]
		if strings.HasPrefix(s, `"`) {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("landlock: unterminated value for %s", key)
			}
			out = append(out, field{key, s[1 : 1+end], true})
			s = s[end+2:]
			continue
		}
		end := strings.IndexByte(s, ' ')
		if end < 0 {
			end = len(s)
		}
		out = append(out, field{key, s[:end], false})
		s = s[end:]
	}
}

// untrusted decodes a string the kernel logged with
// audit_log_untrustedstring: quoted as is, or hex when unquoted.
func untrusted(v string, quoted bool) (string, error) {
	if quoted || v == "(null)" || v == "?" {
		return v, nil
	}
	b, err := hex.DecodeString(v)
	if err != nil {
		return "", fmt.Errorf("not hex: %.40q", v)
	}
	return string(b), nil
}
