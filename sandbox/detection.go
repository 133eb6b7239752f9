package sandbox

import "github.com/sandboxd/sandboxd/sandbox/detect"

// Denial is one access the kernel refused (package detect).
type Denial = detect.Denial

// Detection says how a run's denials were observed (package detect).
type Detection = detect.Detection
