package detect

import (
	"fmt"

	"github.com/sandboxd/sandboxd/boundary"
)

// Denial is one access the kernel refused, exactly as Landlock reported
// it.
type Denial struct {
	// Surface is filesystem or network.
	Surface boundary.Surface `json:"surface"`
	// Operation is the Landlock right without its prefix: read_file,
	// write_file, make_reg, remove_dir, execute, ..., or connect/bind.
	Operation boundary.Operation `json:"operation"`
	// Path is the object for filesystem denials; for creation and removal
	// Landlock names the parent directory.
	Path string `json:"path,omitempty"`
	Dev  string `json:"-"`
	Ino  uint64 `json:"-"`
	Born int64  `json:"-"` // birth time of the object, when it existed
	// Destination is host:port for network denials.
	Destination string `json:"destination,omitempty"`
	// Programs are the executables whose calls were refused, when every
	// call of this denial came with one (make_dir, from the observer);
	// nil when any is unknown.
	Programs []string `json:"-"`
}

// Detection says how a run's denials were observed.
type Detection struct {
	// Detector is "audit" (Landlock's kernel records) or "none".
	Detector string `json:"detector"`
	// Why explains a missing detector.
	Why string `json:"why,omitempty"`
	// Lost is how many denials the kernel counted that were not received
	// (-1: the end-of-domain record never came, so the count is unknown).
	Lost int `json:"lost,omitempty"`
	// Other counts denials that are not file or network accesses
	// (signals and abstract sockets outside the sandbox).
	Other int `json:"other,omitempty"`
}

func (d Denial) String() string {
	if d.Surface == "network" {
		return fmt.Sprintf("%s %s", d.Operation, d.Destination)
	}
	return fmt.Sprintf("%s %s", d.Operation, d.Path)
}

// Key is the boundary the denial is a sighting of: two denials with
// one Key are the same one (boundary.Key).
func (d Denial) Key() boundary.Key {
	return boundary.Key{Surface: d.Surface, Operation: d.Operation, Path: d.Path, Destination: d.Destination}
}
