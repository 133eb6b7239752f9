package sandbox

import "github.com/sandboxd/sandboxd/sandbox/detect"

// Denial is one access the kernel refused (package detect).
type Denial = detect.Denial

// Detection says how a run's denials were observed (package detect).
type Detection = detect.Detection

// Refused is a class of calls refused by design that the command made
// (package detect).
type Refused = detect.Refused
