package sandbox

import (
	"log/slog"

	"github.com/sandboxd/sandboxd/sandbox/detect"
)

// Denial is one access the kernel refused (package detect).
type Denial = detect.Denial

// Detection says how a run's denials were observed (package detect).
type Detection = detect.Detection

// Refused is a class of calls refused by design that the command made
// (package detect).
type Refused = detect.Refused

// AuditHub is a process's one reader of kernel audit records, shared by
// its concurrent runs (package detect's Hub): each run is given only the
// records of its own Landlock domain.
type AuditHub = detect.Hub

// NewAuditHub returns an AuditHub that logs to log. It holds nothing
// until a run starts: kernel audit is on, and the reader runs, only
// while some run of the process needs it.
func NewAuditHub(log *slog.Logger) *AuditHub { return detect.NewHub(log) }
